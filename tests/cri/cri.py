#!/usr/bin/python3
"""One CRI call over gRPC, JSON in and out: what crictl would do, for the
containerd CRI end-to-end test (Debian 12 has no crictl).

    cri.py SOCKET METHOD [REQUEST_JSON]

METHOD is a RuntimeService method of runtime.proto beside this file (for
example RunPodSandbox); REQUEST_JSON is the request in protobuf's JSON
mapping (camelCase field names). Prints the response as JSON on stdout.
On a gRPC error prints `CODE: details` on stderr and exits 2.

Needs python3-grpcio and python3-grpc-tools (the stubs are generated into a
temporary directory at each run).
"""

import importlib
import json
import os
import sys
import tempfile

import grpc
from google.protobuf import json_format
from grpc_tools import protoc


def load_messages(workdir):
    here = os.path.dirname(os.path.abspath(__file__))
    rc = protoc.main(["protoc", f"-I{here}", f"--python_out={workdir}", "runtime.proto"])
    if rc != 0:
        sys.exit(f"protoc failed on {here}/runtime.proto")
    sys.path.insert(0, workdir)
    return importlib.import_module("runtime_pb2")


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    socket, method = sys.argv[1], sys.argv[2]
    request_json = sys.argv[3] if len(sys.argv) == 4 else "{}"
    with tempfile.TemporaryDirectory() as workdir:
        pb = load_messages(workdir)
        request_type = getattr(pb, f"{method}Request", None)
        response_type = getattr(pb, f"{method}Response", None)
        if request_type is None or response_type is None:
            sys.exit(f"unknown method {method}")
        request = json_format.Parse(request_json, request_type())
        with grpc.insecure_channel(f"unix://{socket}") as channel:
            call = channel.unary_unary(
                f"/runtime.v1.RuntimeService/{method}",
                request_serializer=request_type.SerializeToString,
                response_deserializer=response_type.FromString,
            )
            try:
                response = call(request, timeout=120)
            except grpc.RpcError as e:
                print(f"{e.code().name}: {e.details()}", file=sys.stderr)
                sys.exit(2)
    print(json.dumps(json_format.MessageToDict(response, including_default_value_fields=True)))


if __name__ == "__main__":
    main()
