"""A LoRA fine-tune written as a PEFT adapter folder (`minitx export --format peft --out DIR`):
adapter_config.json (peft's LoraConfig, saved by peft) and adapter_model.safetensors, the
adapters under the names transformers' model of the base's family gives its layers, so that

    PeftModel.from_pretrained(AutoModelForSeq2SeqLM.from_pretrained(BASE), DIR)

loads every adapter, none missing or unexpected, and computes what minitx computes. The names
are hf_weights' table (layer_names) read the other way, as a folder export reads it.
"""

from __future__ import annotations

from pathlib import Path

from safetensors.torch import save_file

from minitx.core.data.task import Task
from minitx.core.importing.hf_export import ExportError, check_out, staged_folder
from minitx.core.importing.hf_weights import T5_LIKE, layer_names
from minitx.core.model import lora
from minitx.core.model.transformer import Seq2Seq

ADAPTER_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."  # what PeftModel puts before the transformers model's names


def hf_module_names(family: str, model: Seq2Seq) -> dict[str, str]:
    """minitx module name -> transformers' module name (with its "model." prefix where the family
    has one) for every linear layer of the attention blocks."""
    prefix = "" if family in T5_LIKE else "model."
    return {mine.removesuffix(".weight"): prefix + theirs.removesuffix(".weight")
            for mine, theirs in layer_names(family, model.cfg).items()
            if mine.endswith("_proj.weight")}


def folder_family(task: Task) -> str:
    """The base's Hugging Face family (hf_weights' names: marian, t5, bart, m2m_100, ...);
    ExportError for a base that was no Hugging Face folder."""
    family = task.origin.family if task.origin is not None else ""
    if not family:
        raise ExportError("its base is no Hugging Face model, so there is no PEFT folder to write "
                          "(--format hf writes the merged model)")
    return family


def export_peft(model: Seq2Seq, task: Task, adapters: lora.LoraFile, out: str | Path,
                force: bool = False) -> list[str]:
    """Write `adapters` (a LoRA file's, on `model`'s base) as a PEFT adapter folder at `out`;
    the names written. ExportError (one line) when it cannot be."""
    out = Path(out)
    check_out(out, force)
    names = hf_module_names(folder_family(task), model)
    modules = [m.removesuffix(".lora_A") for m in adapters.tensors if m.endswith(".lora_A")]
    missing = [m for m in modules if m not in names]
    if missing:
        raise ExportError(f"layer {missing[0]} has no name in transformers' model of this family")
    state = {}
    for module in modules:
        for part in ("lora_A", "lora_B"):
            state[f"{PEFT_PREFIX}{names[module]}.{part}.weight"] = \
                adapters.tensors[f"{module}.{part}"].contiguous().clone()
    config = adapters.spec.peft_config(sorted(names[m] for m in modules))
    config.task_type = "SEQ_2_SEQ_LM"
    config.base_model_name_or_path = adapters.base.get("model_id") or adapters.base.get("folder") or \
        adapters.base.get("init")
    with staged_folder(out) as staging:
        config.save_pretrained(str(staging))
        save_file(state, str(staging / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    return sorted(p.name for p in out.iterdir())
