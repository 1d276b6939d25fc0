import torch
class Model(
