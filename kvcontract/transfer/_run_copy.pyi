import numpy as np
import numpy.typing as npt

def copy_runs(
    span: memoryview,
    dst: npt.NDArray[np.int64],
    src: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    /,
) -> None: ...
