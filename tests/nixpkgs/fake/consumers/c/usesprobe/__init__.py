# C: a pure-Python package that only uses B, as outlines uses llama_cpp: importing it imports B's
# extension, which loads libprobe.so, which needs libcuda.so.1.
import probe


def init():
    return probe.init()
