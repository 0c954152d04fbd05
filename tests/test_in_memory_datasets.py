"""Datasets held in memory (project/datasets.py, analysis/datasets.py): a project dataset whose
`__getitem__` only indexes what `__init__` stored, or a `TensorDataset`. Loader workers have
nothing to load for them, so TPL501 stays silent; a dataset that reads, decodes or transforms
in `__getitem__`, or one of unknown class, keeps the finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import finding_lines, write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL501 is off by default

_IN_MEMORY = """
    import torch
    from torch.utils.data import Dataset

    class MyTrainDataset(Dataset):
        def __init__(self, size):
            self.size = size
            self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

        def __len__(self):
            return self.size

        def __getitem__(self, index):
            return self.data[index]
    """

_DECODED = """
    from PIL import Image
    from torch.utils.data import Dataset

    class MyTrainDataset(Dataset):
        def __init__(self, paths, labels):
            self.paths = paths
            self.labels = labels

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, index):
            return Image.open(self.paths[index]), self.labels[index]
    """

# pytorch/examples' ddp-tutorial-series: the dataset reaches the loader through a returned
# tuple, then a parameter of the helper that builds the loader
_TRAIN = """
    import torch
    from torch.utils.data import DataLoader
    from datautils import MyTrainDataset

    def load_train_objs():
        train_set = MyTrainDataset(2048)
        model = torch.nn.Linear(20, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        return train_set, model, optimizer

    def prepare_dataloader(dataset, batch_size):
        return DataLoader(dataset, batch_size=batch_size, pin_memory=True)

    def main(batch_size):
        dataset, model, optimizer = load_train_objs()
        train_data = prepare_dataloader(dataset, batch_size)
        for source, targets in train_data:
            loss = model(source.cuda()).sum()
            loss.backward()
            optimizer.step()
    """


def test_a_parameter_every_caller_passes_an_in_memory_dataset(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"datautils.py": _IN_MEMORY, "train.py": _TRAIN})
    assert finding_lines(root, "train.py", "TPL501") == []


def test_a_parameter_given_a_dataset_that_decodes_images(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"datautils.py": _DECODED, "train.py": _TRAIN})
    assert finding_lines(root, "train.py", "TPL501") == [12]


def test_a_dataset_of_a_class_the_project_does_not_define(tmp_path: Path) -> None:
    train = _TRAIN.replace("from datautils import MyTrainDataset", "from torchvision.datasets import MNIST")
    root = write_project(tmp_path, {"train.py": train.replace("MyTrainDataset(2048)", "MNIST('.')")})
    assert finding_lines(root, "train.py", "TPL501") == [12]


def test_a_parameter_one_caller_passes_something_else(tmp_path: Path) -> None:
    other = """
        from train import prepare_dataloader

        def evaluate(dataset):
            return prepare_dataloader(dataset, 64)
        """
    root = write_project(tmp_path, {"datautils.py": _IN_MEMORY, "train.py": _TRAIN, "other.py": other})
    assert finding_lines(root, "train.py", "TPL501") == [12]


def test_an_in_memory_dataset_built_in_another_module_and_bound_to_a_name(tmp_path: Path) -> None:
    train = """
        from torch.utils.data import DataLoader
        from datautils import MyTrainDataset

        dataset = MyTrainDataset(2048)
        loader = DataLoader(dataset, batch_size=32)
        device = "cuda"
        """
    root = write_project(tmp_path, {"datautils.py": _IN_MEMORY, "train.py": train})
    assert finding_lines(root, "train.py", "TPL501") == []
    root = write_project(tmp_path / "decoded", {"datautils.py": _DECODED, "train.py": train})
    assert finding_lines(root, "train.py", "TPL501") == [5]


def test_a_subclass_inherits_its_base_s_item_reading(tmp_path: Path) -> None:
    train = """
        from torch.utils.data import DataLoader
        from datautils import MyTrainDataset

        class Smaller(MyTrainDataset):
            pass

        loader = DataLoader(Smaller(16), batch_size=4)
        device = "cuda"
        """
    root = write_project(tmp_path, {"datautils.py": _IN_MEMORY, "train.py": train})
    assert finding_lines(root, "train.py", "TPL501") == []
