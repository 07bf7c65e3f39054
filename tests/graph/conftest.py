from __future__ import annotations

import torch

torch.set_num_threads(1)
