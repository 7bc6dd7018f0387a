import os

import torch

# Without a GPU the Triton kernels run in Triton's interpreter, which must be chosen
# before the kernels are defined (at import of nvmeter.workloads.ladder_kernels).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
