import torch
from torch import nn


class BaseModel(nn.Module):
    """Subclasses provide `features`; the head is shared."""

    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def pool(self, x):
        # inherited by every model, called from their features()
        if torch.isnan(x).any():
            raise ValueError("NaN in features")
        return x.mean(dim=(2, 3))
