"""Update and graph file formats, generated data, batching and delta output."""

from .batching import iter_chunks
from .exceptions import FormatError, StreamError
from .formats import FORMATS, GraphData, read_graph, read_stream
from .formats.csm import read_query
from .generate import Dataset, GenConfig, generate, write_dataset
from .jsonl import OP_NAMES, delta_to_dict, write_deltas

__all__ = [
    "FORMATS",
    "OP_NAMES",
    "Dataset",
    "FormatError",
    "GenConfig",
    "GraphData",
    "StreamError",
    "delta_to_dict",
    "generate",
    "iter_chunks",
    "read_graph",
    "read_query",
    "read_stream",
    "write_dataset",
    "write_deltas",
]
