"""The process itself: when the garbage collector runs (gc_pacing.py), the heap's free pages handed
back (malloc.py), long loops cut so other threads get the GIL (gil.py); and the child processes it
starts, brokers and MirrorMaker 2 for the demo and the tests (child_process.py)."""
