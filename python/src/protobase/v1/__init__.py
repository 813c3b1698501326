"""Generated modules of the protobase.v1 API (``make python-generate``).

They live at the import path protoc-generated user code expects: a schema
that imports ``protobase/v1/options.proto`` generates ``from protobase.v1
import options_pb2``.
"""
