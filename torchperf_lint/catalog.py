"""Every rule's code, name and default, generated from the rule classes by
`python -m torchperf_lint.docs` (a test fails when it is stale). Rule selection reads this
table instead of the rule classes, so a run whose files are all cached imports neither the
rules nor libcst."""

RULES: tuple[tuple[str, str, bool], ...] = (
    ("TPL101", "cpu-factory-in-hot-path", False),
    ("TPL102", "constant-copied-per-step", False),
    ("TPL103", "python-range-indexing", True),
    ("TPL104", "assert-on-tensor", False),
    ("TPL105", "sync-in-forward", False),
    ("TPL106", "blocking-host-to-device", True),
    ("TPL107", "sync-per-step", False),
    ("TPL201", "loop-over-tensor-dim", False),
    ("TPL202", "cat-in-loop", False),
    ("TPL203", "tensor-from-tensor-list", False),
    ("TPL204", "per-parameter-loop", False),
    ("TPL301", "zero-grad-without-set-to-none", True),
    ("TPL302", "module-in-hot-path", True),
    ("TPL303", "hand-written-fused-op", True),
    ("TPL304", "loss-accumulation-keeps-graph", False),
    ("TPL305", "eval-without-no-grad", False),
    ("TPL306", "hand-written-attention", False),
    ("TPL401", "conv-bias-before-batchnorm", False),
    ("TPL402", "data-parallel", False),
    ("TPL403", "cudnn-benchmark-off", False),
    ("TPL404", "convnet-without-channels-last", True),
    ("TPL405", "size-off-tensor-cores", False),
    ("TPL406", "all-reduce-every-micro-step", False),
    ("TPL501", "dataloader-num-workers", True),
    ("TPL502", "dataloader-pin-memory", False),
    ("TPL503", "dataloader-persistent-workers", True),
    ("TPL601", "anomaly-detection-enabled", True),
    ("TPL602", "profiler-in-training-code", False),
    ("TPL603", "gradcheck-outside-tests", True),
    ("TPL604", "synchronize-in-step", False),
    ("TPL701", "fp32-training", True),
    ("TPL702", "unfused-optimizer", True),
)
