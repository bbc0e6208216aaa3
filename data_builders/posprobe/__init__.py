"""posprobe data: the toy reference language, passkey samples and the references' training batches."""
