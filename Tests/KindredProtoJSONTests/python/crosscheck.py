#!/usr/bin/env python3
"""Kindred's proto3 JSON mapping (KindredProtoJSON) against the reference: Python's
google.protobuf.json_format.

Used by PythonCrossCheckTests.swift. Message classes and random messages come from
Tests/KindredProtobufTests/python/compat.py (the same generated modules and random filler as the
binary compatibility tests).

  crosscheck.py generate ROOT WORK --types-file F --count N --seed S
      For each message type named in F, writes N random messages to WORK/json_cases.txt as
      `id type binary_hex reference_json_hex variant_hex...`: the reference JSON is
      MessageToJson's; each variant is another spelling of the same message that the mapping must
      accept (proto names, 64-bit integers as numbers, 32-bit ones as strings, enum numbers,
      URL-safe or unpadded base64, explicit nulls, whitespace).
  crosscheck.py verify ROOT WORK
      Reads WORK/json_cases.txt and WORK/swift_json.txt (`id json_hex binary_hex...`: Kindred's
      JSON of the binary, then Kindred's binary of the reference JSON and of each variant) and
      checks that Kindred's JSON equals the reference as JSON values, that Python's Parse of it
      gives the message back, and that every binary Kindred made parses to the message.

Exits non-zero with a report on any mismatch.
"""

import argparse
import base64
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "KindredProtobufTests", "python"))
import compat  # noqa: E402

from google.protobuf import json_format  # noqa: E402

FD = compat.FD
INT64_TYPES = {FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64, FD.TYPE_UINT64, FD.TYPE_FIXED64}
INT32_TYPES = {FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32, FD.TYPE_UINT32, FD.TYPE_FIXED32}
VARIANTS = 2


def respell_value(field, value, rng):
    """Another accepted spelling of one scalar or message value of `field`."""
    if field.message_type is not None:
        return respell(field.message_type, value, rng)
    if field.type in INT64_TYPES and rng.random() < 0.5:
        return int(value)
    if field.type in INT32_TYPES and rng.random() < 0.3:
        return str(value)
    if field.type == FD.TYPE_ENUM and isinstance(value, str) and rng.random() < 0.5:
        return field.enum_type.values_by_name[value].number
    if field.type == FD.TYPE_BYTES and rng.random() < 0.6:
        data = base64.b64decode(value)
        text = base64.urlsafe_b64encode(data).decode() if rng.random() < 0.5 else value
        return text.rstrip("=") if rng.random() < 0.5 else text
    return value


def respell(descriptor, obj, rng):
    """`obj` (a message as MessageToJson gives it) spelled differently, same message."""
    out = {}
    by_json = {field.json_name: field for field in descriptor.fields}
    for key, value in obj.items():
        field = by_json[key]
        name = field.name if rng.random() < 0.5 else field.json_name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            value = {k: respell_value(value_field, v, rng) for k, v in value.items()}
        elif field.is_repeated:
            value = [respell_value(field, item, rng) for item in value]
        else:
            value = respell_value(field, value, rng)
        out[name] = value
    # null is every absent field's default (for a oneof member, it sets nothing).
    for field in descriptor.fields:
        if field.json_name not in obj and rng.random() < 0.15:
            out[field.json_name if rng.random() < 0.5 else field.name] = None
    items = list(out.items())
    rng.shuffle(items)
    return dict(items)


def parses_in_python(text, cls):
    """Whether Python's Parse takes `text`. It refuses its own output for the largest floats:
    MessageToJson writes FLT_MAX as 3.4028235e+38, the shortest text that reads back as that float,
    and Parse compares the double 3.4028235e+38 with FLT_MAX and finds it too large. Kindred (like
    protobuf's C++ parser) accepts it; the cross-check skips Python's Parse for such messages."""
    try:
        json_format.Parse(text, cls())
        return True
    except json_format.ParseError as error:
        if "Float value too large" in str(error):
            return False
        raise


def generate(args):
    filler = compat.Random(args.seed)
    rng = random.Random(args.seed)
    with open(args.types_file) as file:
        names = [line.strip() for line in file if line.strip()]
    case = 0
    with open(os.path.join(args.work, "json_cases.txt"), "w") as out:
        for name in names:
            cls = compat.message_class(name)
            for index in range(args.count):
                message = filler.fill(cls(), depth=1) if index else cls()
                reference = json_format.MessageToJson(message, indent=None)
                columns = [str(case), name, compat.to_hex(message.SerializeToString()), reference.encode().hex()]
                for _ in range(VARIANTS):
                    variant = respell(cls.DESCRIPTOR, json.loads(reference), rng)
                    text = json.dumps(variant, indent=rng.choice([None, 1]), ensure_ascii=rng.random() < 0.5)
                    # The variant is the same message to the reference implementation, too.
                    if parses_in_python(reference, cls) and not compat.same(json_format.Parse(text, cls()), message):
                        compat.fail(f"case {case} ({name}): the variant generator changed the message: {text}")
                    columns.append(text.encode().hex())
                out.write(" ".join(columns) + "\n")
                case += 1
    print(f"generated {case} messages of {len(names)} types")


def float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def same_value(field, a, b):
    """One JSON value of `field` in Kindred's output and in the reference's. A float is the same when
    it reads back as the same float: MessageToJson writes at least 6 significant digits
    (1.4013e-45), the shortest text that reads back is enough (1e-45)."""
    if field.message_type is not None:
        return isinstance(a, dict) and isinstance(b, dict) and same_object(field.message_type, a, b)
    if field.type == FD.TYPE_FLOAT and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return type(a) is type(b) and float32(a) == float32(b)
    return type(a) is type(b) and a == b


def same_object(descriptor, a, b):
    """Two JSON objects of message type `descriptor`, compared field by field."""
    if set(a) != set(b):
        return False
    fields = {field.json_name: field for field in descriptor.fields}
    for key, value in a.items():
        field, other = fields[key], b[key]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if set(value) != set(other) or not all(same_value(value_field, value[k], other[k]) for k in value):
                return False
        elif field.is_repeated:
            if len(value) != len(other) or not all(same_value(field, x, y) for x, y in zip(value, other)):
                return False
        elif not same_value(field, value, other):
            return False
    return True


def python_parse_failures(case, name, cls, swift_json, original):
    """Python's Parse of Kindred's JSON, which must give the original message."""
    try:
        parsed = json_format.Parse(swift_json, cls())
    except json_format.ParseError as error:
        return [f"case {case} ({name}): Python's Parse refuses Kindred's JSON ({error}): {swift_json}"]
    if not compat.same(parsed, original):
        return [f"case {case} ({name}): Python's Parse of Kindred's JSON differs\n  {swift_json}"]
    return []


def verify(args):
    cases = {}
    for columns in compat.read_records(os.path.join(args.work, "json_cases.txt"), 4 + VARIANTS):
        cases[columns[0]] = columns[1:]
    failures = []
    checked = 0
    skipped = 0
    for columns in compat.read_records(os.path.join(args.work, "swift_json.txt"), 3 + VARIANTS):
        case, swift_json_hex, binaries = columns[0], columns[1], columns[2:]
        name, binary_hex, reference_hex = cases.pop(case)[:3]
        cls = compat.message_class(name)
        original = cls.FromString(bytes.fromhex(binary_hex))
        reference = bytes.fromhex(reference_hex).decode()
        swift_json = bytes.fromhex(swift_json_hex).decode("utf-8", errors="replace")
        try:
            same_json = same_object(cls.DESCRIPTOR, json.loads(swift_json), json.loads(reference))
        except ValueError as error:
            failures.append(f"case {case} ({name}): Kindred's JSON is not JSON ({error}): {swift_json}")
            continue
        if not same_json:
            failures.append(f"case {case} ({name}): JSON differs\n  reference {reference}\n  Kindred   {swift_json}")
        if parses_in_python(reference, cls):
            failures += python_parse_failures(case, name, cls, swift_json, original)
        else:
            skipped += 1
        for index, binary in enumerate(binaries):
            source = "the reference JSON" if index == 0 else f"variant {index}"
            try:
                decoded = cls.FromString(bytes.fromhex(binary))
            except Exception as error:  # noqa: BLE001 - report any parse failure
                failures.append(f"case {case} ({name}): Kindred's binary of {source} does not parse: {error}")
                continue
            if not compat.same(decoded, original):
                failures.append(f"case {case} ({name}): Kindred's binary of {source} is another message: {decoded}")
            if compat.unknown_field_paths(decoded):
                failures.append(f"case {case} ({name}): Kindred's binary of {source} has unknown fields")
        checked += 1
    if cases:
        failures.append(f"Kindred returned nothing for {len(cases)} cases, e.g. {sorted(cases)[:5]}")
    compat.report(failures, f"checked {checked} messages in JSON both ways ({skipped} with FLT_MAX not through Python's Parse)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["generate", "verify"])
    parser.add_argument("root", help="repository root (holds proto/)")
    parser.add_argument("work", help="folder for generated modules and case files")
    parser.add_argument("--types-file")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    compat.load_modules(args.root, args.work)
    {"generate": generate, "verify": verify}[args.command](args)


if __name__ == "__main__":
    main()
