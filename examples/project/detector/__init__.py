"""A toy detector package, laid out the way real projects are: the model's base class, its
helpers, the loss and the training loop each live in a module of their own."""

from .losses import WeightedCE
from .models.net import Net

__all__ = ["Net", "WeightedCE"]
