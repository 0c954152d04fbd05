"""TPL404 beyond its examples: models defined in other modules, what channels_last elsewhere
silences, and that the fixed model computes what the original did (on the CPU)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import torch

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.project.summary import summarize
from torchperf_lint.rules.modules.tpl404_convnet_without_channels_last import ConvnetWithoutChannelsLast

from .helpers import example_source, finding_lines, write_project

RESNET = """
    import torch.nn as nn

    def conv3x3(cin, cout, stride=1):
        return nn.Conv2d(cin, cout, 3, stride, 1, bias=False)

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv1, self.bn1 = conv3x3(cin, cout), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = conv3x3(cout, cout), nn.BatchNorm2d(cout)

        def forward(self, x):
            return (self.bn2(self.conv2(self.bn1(self.conv1(x)).relu())) + x).relu()

    class ResNet(nn.Module):
        def __init__(self, block, layers, num_classes=10):
            super().__init__()
            self.conv1 = conv3x3(3, 64)
            self.layer1 = self._make_layer(block, 64, layers[0])
            self.fc = nn.Linear(64, num_classes)

        def _make_layer(self, block, planes, blocks):
            return nn.Sequential(*[block(planes, planes) for _ in range(blocks)])

        def forward(self, x):
            return self.fc(self.layer1(self.conv1(x)).mean((2, 3)))

    def resnet18(**kwargs):
        return ResNet(BasicBlock, [2, 2, 2, 2], **kwargs)
    """

TRAIN = """
    import torch
    from models.resnet import resnet18

    device = "cuda"
    model = resnet18().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    """


def test_a_convnet_built_in_another_module_by_a_torchvision_style_factory(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models/__init__.py": "", "models/resnet.py": RESNET, "train.py": TRAIN})
    assert finding_lines(root, "train.py", "TPL404") == [5]


def test_channels_last_in_a_module_the_script_imports_silences_it(tmp_path: Path) -> None:
    model_with_layout = RESNET + "\n    LAYOUT = 'channels_last'\n"
    root = write_project(
        tmp_path, {"models/__init__.py": "", "models/resnet.py": model_with_layout, "train.py": TRAIN}
    )
    assert finding_lines(root, "train.py", "TPL404") == []


def test_channels_last_in_an_unrelated_script_does_not(tmp_path: Path) -> None:
    benchmark = "import torch\nx = torch.randn(1, 3, 8, 8).to(memory_format=torch.channels_last)\n"
    root = write_project(
        tmp_path,
        {"models/__init__.py": "", "models/resnet.py": RESNET, "train.py": TRAIN, "bench.py": benchmark},
    )
    assert finding_lines(root, "train.py", "TPL404") == [5]


def test_a_transformer_classifier_in_another_module_is_no_convnet(tmp_path: Path) -> None:
    vit = """
        import torch.nn as nn

        class Attention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

        class ViT(nn.Module):
            def __init__(self, d=384):
                super().__init__()
                self.patch = nn.Conv2d(3, d, 16, 16)
                self.blocks = nn.ModuleList([Attention(d) for _ in range(12)])
                self.head = nn.Linear(d, 1000)

        def resnet18():
            return ViT()
        """
    root = write_project(tmp_path, {"models/__init__.py": "", "models/resnet.py": vit, "train.py": TRAIN})
    assert finding_lines(root, "train.py", "TPL404") == []


def test_a_weight_initialiser_that_tests_for_convolutions_builds_none(tmp_path: Path) -> None:
    """`isinstance(m, nn.Conv2d)` in `_init_weights` names a layer class; it builds no layer."""
    vit = """
        import torch.nn as nn

        class ViT(nn.Module):
            def __init__(self, d=384):
                super().__init__()
                self.patch = nn.Conv2d(3, d, 16, 16)
                self.head = nn.Linear(d, 1000)
                self.apply(self._init_weights)

            def _init_weights(self, m):
                if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                    nn.init.kaiming_normal_(m.weight)
                elif isinstance(m, nn.Conv2d) or issubclass(type(m), nn.Conv2d):
                    nn.init.zeros_(m.bias)

        def resnet18():
            return ViT()
        """
    summary = summarize(textwrap.dedent(vit))
    assert summary is not None and summary.classes[0].builds.count("nn.Conv2d") == 1
    root = write_project(tmp_path, {"models/__init__.py": "", "models/resnet.py": vit, "train.py": TRAIN})
    assert finding_lines(root, "train.py", "TPL404") == []


def test_the_summary_records_what_classes_and_factories_build() -> None:
    summary = summarize(textwrap.dedent(RESNET))
    assert summary is not None
    resnet = next(c for c in summary.classes if c.name == "ResNet")
    assert "conv3x3" in resnet.builds and "nn.Linear" in resnet.builds
    factory = next(f for f in summary.functions if f.name == "resnet18")
    assert factory.returns == [["ResNet", "BasicBlock"]]
    grouped = summarize(
        "import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self):\n        self.c = nn.Conv2d(8, 8, 3, groups=8)\n"
    )
    assert grouped is not None and grouped.classes[0].builds == ["nn.Conv2d#grouped"]
    assert not summary.channels_last
    assert summarize("parser.add_argument('--channels-last', action='store_true')\n").channels_last  # type: ignore[union-attr]


def _train_and_record(source: str) -> list[tuple[torch.Tensor, bool]]:
    """Runs the example's `train` for two steps on the CPU, recording each forward's output and
    whether its input was in channels_last layout."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "example.py", "exec"), namespace)  # noqa: S102  # the rule's own example
    net = namespace["Net"]
    forward = net.forward
    seen: list[tuple[torch.Tensor, bool]] = []

    def recording(self: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        out = forward(self, x)
        seen.append((out.detach().clone(), x.is_contiguous(memory_format=torch.channels_last)))
        return out

    net.forward = recording
    generator = torch.Generator().manual_seed(0)
    batches = [(torch.randn(4, 3, 32, 32, generator=generator), torch.tensor([0, 1, 2, 3])) for _ in range(2)]
    torch.manual_seed(0)
    namespace["train"](batches, device="cpu")
    return seen


def test_the_fixed_model_computes_what_the_original_did() -> None:
    original = example_source(ConvnetWithoutChannelsLast.BAD["resnet-like-class"])
    fixed = fix_source(original, path="example.py", unsafe=True, select=["TPL404"])
    assert "channels_last" in fixed
    before, after = _train_and_record(original), _train_and_record(fixed)
    assert [layout for _, layout in before] == [False, False]
    assert [layout for _, layout in after] == [True, True]  # the fix took effect
    for (a, _), (b, _) in zip(before, after, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


# -- TPL405 ------------------------------------------------------------------------------------


def _tpl405(source: str) -> list[int]:
    findings = lint_source(textwrap.dedent(source).lstrip("\n"), path="model.py", select=["TPL405"])
    return [f.line for f in findings]


def test_a_field_two_config_classes_default_differently_is_unreadable() -> None:
    source = """
        import torch.nn as nn

        class Small:
            vocab_size = 50257

        class Large:
            vocab_size = 50304

        class LM(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.head = nn.Linear(768, config.vocab_size)

        model = LM(Small()).cuda()
        """
    assert _tpl405(source) == []
    assert _tpl405(source.replace("50304", "50257")) == [12]


def test_the_message_names_the_padded_size_and_where_the_size_was_read() -> None:
    source = "import torch.nn as nn\nV = 50257\nhead = nn.Linear(768, V).cuda()\nfor x in loader:\n    head(x).sum().backward()\n"
    (finding,) = lint_source(source, path="model.py", select=["TPL405"])
    assert (
        "50257 (V)" in finding.message
        and "pad it to 50304" in finding.message
        and "47 extra" in finding.message
    )


ENCODER_BY_KEYWORD = """
    import torch
    import torch.nn as nn

    class Encoder(nn.Module):
        def __init__(self, vocab_size, d=256):
            super().__init__()
            self.tok = nn.Embedding(vocab_size, d)
            self.out = nn.Linear(d, 4)

        def forward(self, idx):
            return self.out(self.tok(idx).mean(1))

    model = Encoder(vocab_size=30001).cuda()
    for x, y in loader:
        model(x.cuda()).sum().backward()
    """


def test_a_vocabulary_keyword_that_reaches_only_a_lookup_is_silent() -> None:
    assert _tpl405(ENCODER_BY_KEYWORD) == []


def test_a_vocabulary_keyword_that_reaches_a_linear_head_or_a_tied_embedding_is_reported() -> None:
    head = ENCODER_BY_KEYWORD.replace("nn.Linear(d, 4)", "nn.Linear(d, vocab_size)")
    assert _tpl405(head) == [13]
    tied = ENCODER_BY_KEYWORD.replace("self.out(self.tok(idx).mean(1))", "self.tok(idx) @ self.tok.weight.T")
    assert _tpl405(tied) == [13]


DARKNET = """
    import torch.nn as nn

    def create_modules(module_defs):
        hyperparams = module_defs.pop(0)
        output_filters = [hyperparams["channels"]]
        module_list = nn.ModuleList()
        for module_i, module_def in enumerate(module_defs):
            modules = nn.Sequential()
            if module_def["type"] == "convolutional":
                filters = int(module_def["filters"])
                modules.add_module(f"conv_{module_i}", nn.Conv2d(output_filters[-1], filters, 3, padding=1))
                modules.add_module(f"batch_norm_{module_i}", nn.BatchNorm2d(filters))
            elif module_def["type"] == "upsample":
                modules.add_module(f"upsample_{module_i}", nn.Upsample(scale_factor=2))
            elif module_def["type"] == "yolo":
                modules.add_module(f"yolo_{module_i}", YOLOLayer(module_def["anchors"]))
            module_list.append(modules)
            output_filters.append(filters)
        return hyperparams, module_list

    class YOLOLayer(nn.Module):
        def __init__(self, anchors):
            super().__init__()
            self.anchors = anchors
            self.mse_loss = nn.MSELoss()

    class Darknet(nn.Module):
        def __init__(self, config_path):
            super().__init__()
            self.module_defs = parse_model_config(config_path)
            self.hyperparams, self.module_list = create_modules(self.module_defs)

    def resnet18():
        return Darknet("yolov3.cfg")
    """

# the same builder, filling its container with transformer layers
CFG_TRANSFORMER = """
    import torch.nn as nn

    def create_modules(module_defs):
        module_list = nn.ModuleList()
        for module_def in module_defs:
            if module_def["type"] == "attention":
                module_list.append(nn.MultiheadAttention(module_def["dim"], 8))
            elif module_def["type"] == "mlp":
                module_list.append(nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)))
        return module_list

    class Net(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.patch = nn.Conv2d(3, 512, 16, 16)
            self.head = nn.Conv2d(512, 10, 1)
            self.blocks = create_modules(cfg)

    def resnet18():
        return Net(cfg)
    """


def test_a_convnet_built_from_a_config_by_a_builder_function_is_reported(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models/__init__.py": "", "models/resnet.py": DARKNET, "train.py": TRAIN})
    assert finding_lines(root, "train.py", "TPL404") == [5]


def test_a_transformer_built_from_a_config_in_a_loop_is_no_convnet(tmp_path: Path) -> None:
    root = write_project(
        tmp_path, {"models/__init__.py": "", "models/resnet.py": CFG_TRANSFORMER, "train.py": TRAIN}
    )
    assert finding_lines(root, "train.py", "TPL404") == []


def test_an_mlp_built_in_a_loop_is_no_convnet(tmp_path: Path) -> None:
    mlp = """
        import torch.nn as nn

        class MLP(nn.Module):
            def __init__(self, depth):
                super().__init__()
                self.stem = nn.Conv2d(3, 8, 3)
                self.reduce = nn.Conv2d(8, 8, 3)
                self.layers = nn.ModuleList()
                for _ in range(depth):
                    self.layers.append(nn.Linear(512, 512))

        def resnet18():
            return MLP(8)
        """
    root = write_project(tmp_path, {"models/__init__.py": "", "models/resnet.py": mlp, "train.py": TRAIN})
    assert finding_lines(root, "train.py", "TPL404") == []


def test_a_vgg_style_builder_returning_a_sequential_of_its_list_is_reported(tmp_path: Path) -> None:
    vgg = """
        import torch.nn as nn

        def make_layers(cfg):
            layers = []
            for v in cfg:
                layers += [nn.Conv2d(3, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            return nn.Sequential(*layers)

        class VGG(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.features = make_layers(cfg)
                self.classifier = nn.Linear(512, 10)

        def resnet18():
            return VGG([64, 128, 256])
        """
    root = write_project(tmp_path, {"models/__init__.py": "", "models/resnet.py": vgg, "train.py": TRAIN})
    assert finding_lines(root, "train.py", "TPL404") == [5]


def test_convnext_blocks_and_instance_norm_nets_built_in_loops_stay_silent(tmp_path: Path) -> None:
    convnext = """
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
                self.norm = nn.LayerNorm(dim)
                self.pwconv1, self.pwconv2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        class ConvNeXt(nn.Module):
            def __init__(self, depths):
                super().__init__()
                self.downsample_layers = nn.ModuleList()
                for i in range(4):
                    self.downsample_layers.append(nn.Conv2d(96, 96, 2, stride=2))
                self.stages = nn.ModuleList([nn.Sequential(*[Block(96) for _ in range(d)]) for d in depths])

        def resnet18():
            return ConvNeXt([3, 3, 9, 3])
        """
    style = """
        import torch.nn as nn

        def build(n):
            layers = []
            for _ in range(n):
                layers += [nn.Conv2d(64, 64, 3, padding=1), nn.InstanceNorm2d(64), nn.ReLU()]
            return nn.Sequential(*layers)

        class TransformerNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = build(5)

        def resnet18():
            return TransformerNet()
        """
    for model in (convnext, style):
        root = write_project(
            tmp_path, {"models/__init__.py": "", "models/resnet.py": model, "train.py": TRAIN}
        )
        assert finding_lines(root, "train.py", "TPL404") == []


def test_the_move_in_a_model_loader_that_a_training_script_steps_is_reported(tmp_path: Path) -> None:
    loader = DARKNET + textwrap.indent(
        textwrap.dedent("""
        import torch

        def load_model(model_path):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Darknet(model_path).to(device)
            return model

        def show(model_path):
            model = Darknet(model_path).to("cuda")
            return model
        """),
        "    ",
    )
    train = """
        import torch
        from models.resnet import load_model

        device = torch.device("cuda")
        model = load_model("yolov3.cfg")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in train_loader:
            model(x.to(device)).sum().backward()
            optimizer.step()
        """
    root = write_project(tmp_path, {"models/__init__.py": "", "models/resnet.py": loader, "train.py": train})
    source = (root / "models/resnet.py").read_text().splitlines()
    lines = finding_lines(root, "models/resnet.py", "TPL404")
    assert [source[line - 1].strip() for line in lines] == ["model = Darknet(model_path).to(device)"]


PERIOD_DISCRIMINATOR = """
    import torch
    import torch.nn as nn

    class PeriodCritic(nn.Module):
        def __init__(self, period, k=5, s=3):
            super().__init__()
            self.period = period
            widths = [1, 32, 128, 512, 1024]
            self.convs = nn.ModuleList(
                [nn.Conv2d(a, b, (k, 1), (s, 1), padding=(k // 2, 0)) for a, b in zip(widths, widths[1:])]
            )
            self.out = nn.Conv2d(1024, 1, (3, 1), 1, padding=(1, 0))

        def forward(self, wave):
            b, c, t = wave.shape
            folded = wave.view(b, c, t // self.period, self.period)
            for conv in self.convs:
                folded = torch.nn.functional.leaky_relu(conv(folded), 0.1)
            return self.out(folded).flatten(1)

    critic = PeriodCritic(3).cuda()
    optimizer = torch.optim.AdamW(critic.parameters())
    for wave in loader:
        critic(wave.cuda()).mean().backward()
        optimizer.step()
    """


def test_convolutions_over_a_signal_folded_into_2d_are_no_2d_convnet(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"train.py": PERIOD_DISCRIMINATOR})
    assert finding_lines(root, "train.py", "TPL404") == []


def test_square_kernels_beside_the_folded_ones_still_make_a_2d_convnet(tmp_path: Path) -> None:
    square = PERIOD_DISCRIMINATOR.replace("(k, 1), (s, 1), padding=(k // 2, 0)", "3, 1, padding=1")
    root = write_project(tmp_path, {"train.py": square})
    assert finding_lines(root, "train.py", "TPL404") == [21]


SPECTROGRAM_CLASSIFIER = """
    import torch
    import torch.nn as nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.frontend = nn.Conv1d(1, 64, 400, stride=160)
            self.convs = nn.Sequential(
                nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            )

        def forward(self, wave):
            return self.convs(self.frontend(wave).unsqueeze(1)).mean((1, 2, 3))

    def train(loader, device="cuda"):
        model = Classifier().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for wave, y in loader:
            wave = wave.to(device)
            (model(wave) - y.to(device)).pow(2).mean().backward()
            optimizer.step()
    """


def test_a_convnet_fed_a_signal_gets_the_model_half_of_the_advice_only(tmp_path: Path) -> None:
    """channels_last is defined for 4-D tensors: `wave.to(memory_format=...)` raises on the 3-D
    waveform the model's 1-D front end takes."""
    root = write_project(tmp_path, {"train.py": SPECTROGRAM_CLASSIFIER})
    path = root / "train.py"
    findings = lint_source(path.read_text(), str(path), select=["TPL404"])
    assert [f.line for f in findings] == [18]
    assert "its 4-D input" not in findings[0].message
    fixed = fix_source(path.read_text(), str(path), select=["TPL404"], unsafe=True)
    assert "model = Classifier().to(device, memory_format=torch.channels_last)" in fixed
    assert "wave = wave.to(device)\n" in fixed


def test_an_image_convnet_gets_both_halves_of_the_advice(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models/__init__.py": "", "models/resnet.py": RESNET, "train.py": TRAIN})
    path = root / "train.py"
    [finding] = lint_source(path.read_text(), str(path), select=["TPL404"])
    assert "its 4-D input with x.to(device, memory_format=torch.channels_last)" in finding.message


def test_silent_where_the_runtime_is_older_than_channels_last(tmp_path: Path) -> None:
    files = {"models/__init__.py": "", "models/resnet.py": RESNET, "train.py": TRAIN}
    root = write_project(tmp_path, {**files, "requirements.txt": "torch==1.4.0\n"})
    assert finding_lines(root, "train.py", "TPL404") == []


def test_a_runtime_that_may_have_channels_last_is_reported_without_a_fix_before_it(tmp_path: Path) -> None:
    root = write_project(
        tmp_path, {"train.py": SPECTROGRAM_CLASSIFIER, "requirements.txt": "torch>=1.4,<1.8\n"}
    )
    path = root / "train.py"
    findings = lint_source(path.read_text(), str(path), select=["TPL404"])
    assert [(f.line, f.fix) for f in findings] == [(18, None)]
