"""The one exception type the converter raises for input it cannot lower."""


class ScanLoweringError(ValueError):
    """A TE graph that scan-tir cannot lower faithfully.

    The message always names the offending op, says what is wrong with it and what to
    change. It is raised before any IR is built, so a rejected graph never reaches TVM's
    C++ checks (which would report the problem in terms of buffers the user never wrote).
    """
