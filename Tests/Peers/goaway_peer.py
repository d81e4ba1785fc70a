"""A gRPC server (plaintext HTTP/2 with prior knowledge, the `h2` package) that closes its first connection with
GOAWAY (last stream id 0, NO_ERROR) when the first request arrives, as a server closing an idle connection does when
a call races the close: the server never saw that call. Every request on a later connection gets an empty message
and status OK. Each request is recorded as a JSON line in --record: its connection (1, 2, ...), stream, path,
whether it was refused and, when answered, the bytes of its body.

Prints "LISTENING 127.0.0.1:<port>" once it listens; stops when its stdin closes."""
import argparse
import asyncio
import json
import sys

import h2.config
import h2.connection
import h2.events


class Connection(asyncio.Protocol):
    opened = 0

    def __init__(self, record):
        Connection.opened += 1
        self.number = Connection.opened
        self.record = record
        self.requests = {}  # stream id -> what is recorded when it ends
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        self.h2.initiate_connection()
        transport.write(self.h2.data_to_send())

    def data_received(self, data):
        try:
            events = self.h2.receive_data(data)
        except Exception:  # noqa: BLE001 - a broken client: drop it
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                path = dict(event.headers).get(":path")
                if self.number == 1:
                    self.record({"connection": self.number, "stream": event.stream_id, "path": path, "refused": True})
                    self.h2.close_connection(last_stream_id=0)
                    self.transport.write(self.h2.data_to_send())
                    self.transport.close()
                    return
                self.requests[event.stream_id] = {"connection": self.number, "stream": event.stream_id, "path": path,
                                                  "refused": False, "bytes": 0}
            elif isinstance(event, h2.events.DataReceived):
                self.requests[event.stream_id]["bytes"] += len(event.data)
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.record(self.requests.pop(event.stream_id))
                self.h2.send_headers(event.stream_id, [(":status", "200"), ("content-type", "application/grpc")])
                self.h2.send_data(event.stream_id, b"\x00\x00\x00\x00\x00")  # an empty message, uncompressed
                self.h2.send_headers(event.stream_id, [("grpc-status", "0")], end_stream=True)
        self.transport.write(self.h2.data_to_send())


async def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--record", required=True)
    arguments = parser.parse_args()
    lines = open(arguments.record, "a", buffering=1, encoding="utf-8")
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(lambda entry: lines.write(json.dumps(entry) + "\n")),
                                      "127.0.0.1", 0)
    print(f"LISTENING 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
