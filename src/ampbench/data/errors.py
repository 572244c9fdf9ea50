from ampbench.errors import AmpbenchError


class DataError(AmpbenchError):
    """A data file is missing, corrupt or truncated; the message names the file and the problem."""
