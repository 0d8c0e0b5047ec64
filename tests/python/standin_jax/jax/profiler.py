"""STAND-IN for jax.profiler (see this package's __init__): the annotation classes'
shape, without a profiler behind them. Entering and leaving are counted so a
test can check the hook left them working."""
entered = 0
exited = 0


class TraceAnnotation:
    def __init__(self, name, **kwargs):
        self.name = name
        self.kwargs = kwargs

    def __enter__(self):
        global entered
        entered += 1
        return self

    def __exit__(self, *exc):
        global exited
        exited += 1
        return False


class StepTraceAnnotation(TraceAnnotation):
    def __init__(self, name, **kwargs):
        super().__init__(name, **kwargs)
