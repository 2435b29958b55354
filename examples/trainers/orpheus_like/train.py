# SPDX-License-Identifier: MIT
"""A fine-tuning script that behaves like Orpheus-TTS's, for tests.

Orpheus-TTS (canopyai/Orpheus-TTS, finetune/train.py and
finetune/config.yaml at commit 835ac7cd1870fa1fa5e342e14260c2d68cabb2e7)
is not on PyPI.  What autobatch meets when it runs that script, reproduced
here (the behaviour, not the code):

  * No arguments at all: the script opens "config.yaml" in its working
    directory (a fixed relative path, whatever the command line says) and
    reads TTS_dataset, model_name, run_name, project_name, save_folder,
    epochs, batch_size, save_steps, pad_token, number_processes and
    learning_rate from it (number_processes and pad_token are read and not
    used, as in the original).
  * HF Trainer with TrainingArguments(overwrite_output_dir=True,
    num_train_epochs=epochs, per_device_train_batch_size=batch_size,
    logging_steps=1, output_dir="./" + save_folder, save_steps=save_steps,
    remove_unused_columns=True, learning_rate=learning_rate): no max_steps,
    no gradient accumulation, no gradient checkpointing setting; a loss
    line every step; the Trainer's own tqdm bar (no description); at the
    end of the epochs the Trainer saves checkpoint-N into ./save_folder.
  * No data collator is given, so the Trainer's default one stacks the
    rows as they are: the real dataset is pre-tokenized with variable
    lengths, and with batch_size > 1 the real script crashes with
    "ValueError: expected sequence of length A at dim 1 (got B)" (not an
    out-of-memory).  Here TTS_dataset "synthetic:ROWSxLEN" makes rows of
    one length, so batches stack; "synthetic-varlen:ROWSxLEN" makes
    variable lengths and shows that crash.

Deviations, because this runs on a CPU in tests with nothing downloaded:
  * the model is a tiny Llama built from a config in code with random
    weights (model_name only names it; the original loads the 3B
    "canopylabs/orpheus-tts-0.1-pretrained" from the hub);
  * the original hard-codes attn_implementation="flash_attention_2" and
    bf16=True, which need a CUDA GPU: here flash-attention 2 and bf16 are
    used only when CUDA (and the flash_attn package) is there, otherwise
    eager attention in float32;
  * the original calls wandb.init(project=project_name, name=run_name) and
    reports to wandb: here report_to="none";
  * the dataset is made by the script (load_dataset(TTS_dataset) in the
    original).

Memory grows with batch_size (eager attention over LEN tokens, logits
over the vocabulary), so under an address-space cap some batch size
fits and the next does not.

    cd examples/trainers/orpheus_like && python train.py
"""

import json
import dataclasses
import os
import re

import torch
import yaml
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

config_file = "config.yaml"

with open(config_file, "r") as file:
    config = yaml.safe_load(file)

dsn = config["TTS_dataset"]
model_name = config["model_name"]
run_name = config["run_name"]
project_name = config["project_name"]
base_repo_id = config["save_folder"]
epochs = config["epochs"]
batch_size = config["batch_size"]
save_steps = config["save_steps"]
pad_token = config["pad_token"]
number_processes = config["number_processes"]
learning_rate = config["learning_rate"]

cuda = torch.cuda.is_available()
try:
    import flash_attn  # noqa: F401
    have_flash = True
except Exception:
    have_flash = False
attn = "flash_attention_2" if cuda and have_flash else "eager"

VOCAB = 4096
model_config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                           num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=2048,
                           tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
torch.manual_seed(0)
model = LlamaForCausalLM(model_config)
try:
    model.config._attn_implementation = attn
except Exception:
    pass
print(f"{model_name}: tiny Llama, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
      f"attention {attn}, {'bf16' if cuda else 'float32'} (built from a config, random weights)")


class SyntheticTokens(torch.utils.data.Dataset):
    """Pre-tokenized rows (input_ids, labels, attention_mask) as lists, the
    way Orpheus's datasets hold them."""

    def __init__(self, spec):
        m = re.fullmatch(r"(synthetic|synthetic-varlen):(\d+)x(\d+)", str(spec))
        if not m:
            raise ValueError(f"TTS_dataset {spec!r}: this stand-in makes its data itself; "
                             "use synthetic:ROWSxLEN or synthetic-varlen:ROWSxLEN")
        self.varlen, self.rows, self.length = m.group(1) != "synthetic", int(m.group(2)), int(m.group(3))

    def __len__(self):
        return self.rows

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        n = self.length if not self.varlen else int(self.length * (0.5 + 0.5 * torch.rand(1, generator=g).item()))
        ids = torch.randint(3, VOCAB, (n,), generator=g).tolist()
        return {"input_ids": ids, "labels": list(ids), "attention_mask": [1] * n}


ds = SyntheticTokens(dsn)

# transformers 5 dropped overwrite_output_dir (Orpheus was written for 4.x,
# where it is passed as True): pass it where it still exists.
_compat = {}
if "overwrite_output_dir" in {f.name for f in dataclasses.fields(TrainingArguments)}:
    _compat["overwrite_output_dir"] = True
training_args = TrainingArguments(
    **_compat,
    num_train_epochs=epochs,
    per_device_train_batch_size=batch_size,
    logging_steps=1,
    bf16=cuda,
    output_dir=f"./{base_repo_id}",
    report_to="none",
    save_steps=save_steps,
    remove_unused_columns=True,
    learning_rate=learning_rate,
)



def vm_peak_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Trace(TrainerCallback):
    """For tests (not in Orpheus): when ORPHEUS_LIKE_TRACE names a file,
    append one JSON line per event (start, step, save, end) with the pid
    and the working directory.  Observes only."""

    def __init__(self, path):
        self.path = path

    def write(self, event, **fields):
        line = json.dumps(dict(ev=event, pid=os.getpid(), cwd=os.getcwd(), vm_peak_kb=vm_peak_kb(), **fields)) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def on_train_begin(self, args, state, control, **kw):
        self.write("start", output_dir=os.path.abspath(args.output_dir), batch_size=args.per_device_train_batch_size,
                   max_steps=state.max_steps, dataset=str(dsn))

    def on_step_end(self, args, state, control, **kw):
        self.write("step", step=state.global_step)

    def on_save(self, args, state, control, **kw):
        self.write("save", step=state.global_step, path=os.path.abspath(args.output_dir))

    def on_train_end(self, args, state, control, **kw):
        self.write("end", step=state.global_step)


trainer = Trainer(
    model=model,
    args=training_args,
    train_dataset=ds,
    callbacks=[Trace(os.environ["ORPHEUS_LIKE_TRACE"])] if os.environ.get("ORPHEUS_LIKE_TRACE") else None,
)

trainer.train()
