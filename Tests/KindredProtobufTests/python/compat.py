#!/usr/bin/env python3
"""Byte compatibility between Kindred's protobuf-c based Swift types and Python's protobuf.

Used by PythonCompatibilityTests.swift; every subcommand first generates the Python modules for
proto/ and proto/plugin/testdata into WORK/python with grpc_tools.protoc.

  compat.py generate ROOT WORK --types-file F --count N --seed S
      For each message type named in F (one per line), writes N random messages to
      WORK/python_cases.txt as `id type input_hex expected_hex`: `expected` is Python's
      serialization, `input` is the same with unknown fields appended to some of them.
  compat.py verify ROOT WORK
      Reads WORK/python_cases.txt and WORK/swift_output.txt (`id type hex`, Swift's re-encoding of
      each input) and checks that each output parses to a message equal to the expected one.
  compat.py descriptors ROOT WORK
      Reads WORK/swift_descriptors.txt (`file hex`, the serialized FileDescriptorProtos Swift embeds
      for server reflection, imports first) and WORK/swift_symbols.txt (`file symbol`), builds a
      descriptor pool from the former and checks that it finds every symbol in the right file.
  compat.py echo ROOT WORK
      Reads WORK/swift_cases.txt (`id type hex`, messages Swift made), parses each strictly (no
      unknown fields anywhere) and writes Python's re-serialization to WORK/python_echo.txt.

Exits non-zero with a report on any mismatch.
"""

import argparse
import glob
import importlib
import importlib.util
import math
import os
import random
import struct
import subprocess
import sys


def fail(message):
    print(f"compat.py: {message}", file=sys.stderr)
    sys.exit(1)


try:
    from google.protobuf import descriptor, descriptor_pool, message_factory
    from google.protobuf import unknown_fields as unknown_fields_module
    import grpc_tools
except ImportError as error:  # The Swift test reports this as a failure, not a skip.
    fail(f"Python is missing a package ({error}); install `protobuf` and `grpcio-tools` with pip")

FD = descriptor.FieldDescriptor


# --- Generated modules ---------------------------------------------------------------------------


def load_modules(root, work):
    """Generates and imports the _pb2 modules for every proto of the repository."""
    out = os.path.join(work, "python")
    os.makedirs(out, exist_ok=True)
    roots = [os.path.join(root, "proto"), os.path.join(root, "proto", "plugin", "testdata")]
    protos = []
    for base in roots:
        for path in sorted(glob.glob(os.path.join(base, "**", "*.proto"), recursive=True)):
            relative = os.path.relpath(path, base)
            if base == roots[0] and relative.startswith("plugin" + os.sep):
                continue
            protos.append(relative)
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{roots[0]}", f"-I{roots[1]}", f"-I{well_known}",
               f"--python_out={out}"] + protos
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"grpc_tools.protoc failed:\n{result.stderr}")
    sys.path.insert(0, out)
    for proto in protos:
        module = proto[: -len(".proto")].replace(os.sep, ".") + "_pb2"
        if module.startswith("grpc."):
            # The installed grpcio package owns the name `grpc`: load these by path.
            path = os.path.join(out, proto[: -len(".proto")] + "_pb2.py")
            spec = importlib.util.spec_from_file_location("compat_" + module.replace(".", "_"), path)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        else:
            importlib.import_module(module)


def message_class(name):
    try:
        return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(name))
    except KeyError:
        fail(f"Python knows no message type {name}")


# --- Random messages -----------------------------------------------------------------------------

INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1), FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1), FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1), FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1), FD.TYPE_FIXED64: (0, 2**64 - 1),
}
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.1, math.inf, -math.inf, math.nan, 1e-45, 3.4028234663852886e38, 1.17549435e-38]
DOUBLES = [0.0, -0.0, 1.0, -1.0, 0.1, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308, 2.2250738585072014e-308]


class Random:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def integer(self, field_type):
        low, high = INT_RANGES[field_type]
        choice = self.rng.random()
        if choice < 0.3:
            return self.rng.choice([low, high, 0, 1, -1 if low < 0 else 2, 127, 128, 300])
        if choice < 0.6:
            return max(low, min(high, self.rng.randint(-1000, 100000)))
        return self.rng.randint(low, high)

    def floating(self, field_type):
        if self.rng.random() < 0.35:
            return self.rng.choice(FLOATS if field_type == FD.TYPE_FLOAT else DOUBLES)
        if field_type == FD.TYPE_FLOAT:
            value = struct.unpack("<f", struct.pack("<I", self.rng.getrandbits(32)))[0]
        else:
            value = struct.unpack("<d", struct.pack("<Q", self.rng.getrandbits(64)))[0]
        return value

    def text(self):
        characters = []
        for _ in range(self.rng.choice([0, 1, 3, 8, 20])):
            kind = self.rng.random()
            if kind < 0.05:
                code = 0
            elif kind < 0.45:
                code = self.rng.randint(1, 0x7F)
            elif kind < 0.65:
                code = self.rng.randint(0x80, 0x7FF)
            elif kind < 0.85:
                code = self.rng.randint(0x800, 0xFFFF)
            else:
                code = self.rng.randint(0x10000, 0x10FFFF)
            if 0xD800 <= code <= 0xDFFF:  # surrogates are not Unicode scalars
                code = 0xFFFD
            characters.append(chr(code))
        return "".join(characters)

    def data(self):
        return bytes(self.rng.getrandbits(8) for _ in range(self.rng.choice([0, 1, 5, 16, 40])))

    def enum(self, enum_type):
        if self.rng.random() < 0.2:  # proto3 enums are open
            return self.rng.choice([99, 1000, -5, 2**31 - 1, -(2**31)])
        return self.rng.choice(enum_type.values).number

    def value(self, field):
        t = field.type
        if t in INT_RANGES:
            return self.integer(t)
        if t in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
            return self.floating(t)
        if t == FD.TYPE_BOOL:
            return self.rng.random() < 0.5
        if t == FD.TYPE_STRING:
            return self.text()
        if t == FD.TYPE_BYTES:
            return self.data()
        if t == FD.TYPE_ENUM:
            return self.enum(field.enum_type)
        raise ValueError(f"unexpected field type {t}")

    def fill(self, message, depth):
        fields = message.DESCRIPTOR.fields
        chosen = {}
        for oneof in message.DESCRIPTOR.oneofs:
            members = list(oneof.fields)
            chosen[oneof.name] = self.rng.choice(members + [None]) if members else None
        for field in fields:
            if field.containing_oneof is not None:
                if chosen[field.containing_oneof.name] is not field:
                    continue
            elif self.rng.random() < 0.25:
                continue  # leave at the default
            deeper = depth < 4
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                key_field, value_field = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
                container = getattr(message, field.name)
                for _ in range(self.rng.randint(0, 3)):
                    key = self.value(key_field)
                    if value_field.message_type is not None:
                        entry = container[key]
                        if deeper:
                            self.fill(entry, depth + 1)
                    else:
                        container[key] = self.value(value_field)
            elif field.is_repeated:
                container = getattr(message, field.name)
                if field.message_type is not None:
                    for _ in range(self.rng.randint(0, 3) if deeper else 0):
                        self.fill(container.add(), depth + 1)
                else:
                    container.extend(self.value(field) for _ in range(self.rng.randint(0, 5)))
            elif field.message_type is not None:
                if deeper or field.containing_oneof is not None:
                    sub = getattr(message, field.name)
                    sub.SetInParent()
                    if deeper:
                        self.fill(sub, depth + 1)
            else:
                setattr(message, field.name, self.value(field))
        return message

    def unknown_fields(self):
        """Fields 5000-5003 (varint, length-delimited, fixed64, fixed32), unknown to every type."""
        out = bytearray()
        out += varint(5000 << 3 | 0) + varint(self.rng.getrandbits(64))
        payload = self.data()
        out += varint(5001 << 3 | 2) + varint(len(payload)) + payload
        out += varint(5002 << 3 | 1) + self.rng.getrandbits(64).to_bytes(8, "little")
        out += varint(5003 << 3 | 5) + self.rng.getrandbits(32).to_bytes(4, "little")
        return bytes(out)


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# --- Comparison ----------------------------------------------------------------------------------


def same(a, b):
    # NaN != NaN, so messages holding one compare by their canonical bytes.
    return a == b or a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def unknown_field_paths(message, path=""):
    """Paths of messages (nested included) that hold unknown fields."""
    found = []
    if len(unknown_fields_module.UnknownFieldSet(message)):
        found.append(path or "<root>")
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is not None:
                for key in value:
                    found += unknown_field_paths(value[key], f"{path}.{field.name}[{key!r}]")
        elif field.is_repeated:
            for index, item in enumerate(value):
                found += unknown_field_paths(item, f"{path}.{field.name}[{index}]")
        else:
            found += unknown_field_paths(value, f"{path}.{field.name}")
    return found


def read_records(path, columns):
    """Lines of space-separated columns; hex columns hold "-" for no bytes."""
    with open(path) as file:
        for line in file:
            parts = ["" if part == "-" else part for part in line.split()]
            if len(parts) != columns:
                fail(f"{path}: bad line {line!r}")
            yield parts


def to_hex(data):
    return data.hex() or "-"


# --- Subcommands ---------------------------------------------------------------------------------


def generate(args):
    rng = Random(args.seed)
    with open(args.types_file) as file:
        names = [line.strip() for line in file if line.strip()]
    case = 0
    with open(os.path.join(args.work, "python_cases.txt"), "w") as out:
        for name in names:
            cls = message_class(name)
            for index in range(args.count):
                message = rng.fill(cls(), depth=1) if index else cls()  # the first one empty
                expected = message.SerializeToString()
                data = expected + (rng.unknown_fields() if index % 3 == 1 else b"")
                out.write(f"{case} {name} {to_hex(data)} {to_hex(expected)}\n")
                case += 1
    print(f"generated {case} messages of {len(names)} types")


def verify(args):
    expected = {}
    for case, name, _, expected_hex in read_records(os.path.join(args.work, "python_cases.txt"), 4):
        expected[case] = (name, bytes.fromhex(expected_hex))
    failures = []
    checked = 0
    for case, name, output_hex in read_records(os.path.join(args.work, "swift_output.txt"), 3):
        expected_name, expected_bytes = expected.pop(case)
        if expected_name != name:
            failures.append(f"case {case}: type {name}, expected {expected_name}")
            continue
        cls = message_class(name)
        want = cls.FromString(expected_bytes)
        try:
            got = cls.FromString(bytes.fromhex(output_hex))
        except Exception as error:  # noqa: BLE001 - report any parse failure
            failures.append(f"case {case} ({name}): Python cannot parse Swift's bytes: {error}")
            continue
        if not same(want, got):
            failures.append(f"case {case} ({name}):\n  expected {want}\n  got      {got}")
        if unknown_field_paths(got):
            failures.append(f"case {case} ({name}): Swift wrote fields Python does not know: {unknown_field_paths(got)}")
        checked += 1
    if expected:
        failures.append(f"Swift returned no output for {len(expected)} cases, e.g. {sorted(expected)[:5]}")
    report(failures, f"verified {checked} Swift re-encodings")


def echo(args):
    failures = []
    count = 0
    with open(os.path.join(args.work, "python_echo.txt"), "w") as out:
        for case, name, data_hex in read_records(os.path.join(args.work, "swift_cases.txt"), 3):
            cls = message_class(name)
            try:
                message = cls.FromString(bytes.fromhex(data_hex))
            except Exception as error:  # noqa: BLE001
                failures.append(f"case {case} ({name}): Python cannot parse Swift's bytes: {error}")
                continue
            unknown = unknown_field_paths(message)
            if unknown:
                failures.append(f"case {case} ({name}): Swift wrote fields Python does not know at {unknown}")
            out.write(f"{case} {name} {to_hex(message.SerializeToString())}\n")
            count += 1
    report(failures, f"parsed and re-serialized {count} Swift messages")


def descriptors(args):
    from google.protobuf import descriptor_pb2

    pool = descriptor_pool.DescriptorPool()
    failures = []
    names = []
    for name, data_hex in read_records(os.path.join(args.work, "swift_descriptors.txt"), 2):
        proto = descriptor_pb2.FileDescriptorProto.FromString(bytes.fromhex(data_hex))
        if proto.name != name:
            failures.append(f"{name}: the descriptor names {proto.name}")
        if proto.HasField("source_code_info"):
            failures.append(f"{name}: source info was not stripped")
        try:
            pool.Add(proto)
        except Exception as error:  # noqa: BLE001
            failures.append(f"{name}: cannot add to a pool: {error}")
        names.append(name)
    for name in names:
        try:
            pool.FindFileByName(name)
        except KeyError as error:
            failures.append(f"{name}: pool cannot build it: {error}")
    checked = 0
    for name, symbol in read_records(os.path.join(args.work, "swift_symbols.txt"), 2):
        try:
            found = pool.FindFileContainingSymbol(symbol).name
        except KeyError:
            try:  # upb's pool does not look up methods by symbol
                found = pool.FindMethodByName(symbol).containing_service.file.name
            except KeyError:
                found = None
        package = pool.FindFileByName(name).package
        if found != name and symbol != package:
            failures.append(f"{symbol}: Swift says {name}, the pool says {found}")
        checked += 1
    report(failures, f"built {len(names)} files and found {checked} symbols")


def report(failures, summary):
    if failures:
        print(f"{len(failures)} mismatches:", file=sys.stderr)
        for failure in failures[:20]:
            print(failure, file=sys.stderr)
        sys.exit(1)
    print(summary)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["generate", "verify", "echo", "descriptors"])
    parser.add_argument("root", help="repository root (holds proto/)")
    parser.add_argument("work", help="folder for generated modules and case files")
    parser.add_argument("--types-file")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    load_modules(args.root, args.work)
    {"generate": generate, "verify": verify, "echo": echo, "descriptors": descriptors}[args.command](args)


if __name__ == "__main__":
    main()
