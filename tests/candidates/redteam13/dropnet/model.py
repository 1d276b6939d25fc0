from torch import nn

from dropnet.blocks import DropGate


def build_model():
    return nn.Sequential(nn.Linear(16, 16), DropGate(16), nn.Linear(16, 4))
