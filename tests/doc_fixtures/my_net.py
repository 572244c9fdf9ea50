"""README's and docs/reports.md's my_net.py:build: a small CNN for --input-shape 3,32,32 --num-classes 10."""

from torch import nn


def build():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(4), nn.Flatten(),
                         nn.Linear(8 * 8 * 8, 10))
