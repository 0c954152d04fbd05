from torch import nn

from ..ops import shuffle_channels
from .base import BaseModel
from .drop import ChannelDrop


class Net(BaseModel):
    def __init__(self, classes: int = 10) -> None:
        super().__init__(64, classes)
        self.body = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU())
        self.drop = ChannelDrop(0.1)

    def features(self, x):
        x = shuffle_channels(self.drop(self.body(x)))
        return self.pool(x)
