"""Bringing a model trained by other code into minitx: the files such a user has.

- state_files.py: the weights, a state_dict saved as .safetensors or as a torch .pt/.pth (read
  with torch.load(weights_only=True) only: nothing in a file is ever unpickled into code);
- mapping.py: which of the file's tensors becomes which minitx parameter, and how (the slices
  of a packed q/k/v projection, a squeezed positional buffer), as an editable JSON mapping,
  with the built-in mappings of the layouts minitx knows;
- vocab_files.py: vocabulary files, one token per line, and their special tokens.

Every problem with a user's file is an ImportFileError (errors.py) whose message is one line
naming the file and the line or key. These modules use torch, safetensors and the standard
library only.
"""
