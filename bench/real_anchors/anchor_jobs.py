# SPDX-License-Identifier: MIT
"""The bench's two jobs, as models and datasets the anchors can wrap.

bench/real_anchors.sh runs autobatch on the jobs themselves
(examples/pytorch/train_tts.py --worst_case, and
examples/trainers/orpheus_like/train.py).  Lightning and the Hugging Face
Trainer need the same model and data handed to them in their own shapes;
this module builds them so that one training step does the same work as
one step of the job:

  tts      train_tts.py's TTS model (imported from the script itself), its
           L1 loss over the unmasked frames, AdamW at its learning rate, and
           its worst-case batch: every text max_text_len tokens, every mel
           max_mel_len frames, no padding.  A sample here is one row of the
           batch that make_batch(..., worst=True) builds.
  orpheus  orpheus_like/train.py's tiny Llama (the same LlamaConfig, eager
           attention in float32, seed 0) and its synthetic pre-tokenized rows
           (the same generator per row), as tensors; the loss is the model's
           own causal-LM loss on labels = input_ids, as the HF Trainer
           computes it.  train.py runs its whole script at import, so the
           few lines that build these are restated here; keep them in step.

Every dataset is indexable and long enough for any batch the bench tries.
"""
import os
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# --- tts -----------------------------------------------------------------


def tts_args():
    """train_tts.py's own defaults (d_model, layers, lengths, lr, seed)."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
    import train_tts
    return train_tts, train_tts.parse_args(["--worst_case"])


def tts_model():
    train_tts, a = tts_args()
    torch.manual_seed(a.seed)
    return train_tts.TTS(a), a


class TTSWorstCase(torch.utils.data.Dataset):
    """Rows of train_tts.py's worst-case batch, made per index."""

    def __init__(self, a, rows=1 << 20):
        self.a, self.rows = a, rows

    def __len__(self):
        return self.rows

    def __getitem__(self, i):
        a = self.a
        g = torch.Generator().manual_seed(a.seed * 1000 + i)
        t, m = a.max_text_len, a.max_mel_len
        return {
            "tokens": torch.randint(1, 256, (t,), generator=g),
            "text_mask": torch.zeros(t, dtype=torch.bool),
            "mels": torch.randn(m, a.n_mels, generator=g),
            "mel_mask": torch.zeros(m, dtype=torch.bool),
        }


def tts_loss(model, a, batch):
    """train_tts.py's loss for one micro-batch (mean L1 over kept frames)."""
    pred = model(batch["tokens"], batch["text_mask"], batch["mels"], batch["mel_mask"])
    keep = (~batch["mel_mask"]).unsqueeze(-1).float()
    return (F.l1_loss(pred, batch["mels"], reduction="none") * keep).sum() / keep.sum() / a.n_mels


# --- orpheus -------------------------------------------------------------

ORPHEUS_VOCAB = 4096
ORPHEUS_LR = 5.0e-5          # config.yaml's learning_rate
ORPHEUS_LEN = 768            # config.yaml's TTS_dataset synthetic:ROWSx768


def orpheus_model():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=ORPHEUS_VOCAB, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                      num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=2048,
                      tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    model.config._attn_implementation = "eager"   # train.py on a CPU
    return model


class OrpheusRows(torch.utils.data.Dataset):
    """train.py's SyntheticTokens("synthetic:ROWSxLEN") rows, as tensors."""

    def __init__(self, rows=1024, length=ORPHEUS_LEN):
        self.rows, self.length = rows, length

    def __len__(self):
        return self.rows

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(3, ORPHEUS_VOCAB, (self.length,), generator=g)
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}


def orpheus_loss(model, batch):
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                 labels=batch["labels"]).loss


def vm_kb():
    """(VmSize, VmPeak) of this process in kB, or (None, None)."""
    got = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmSize:", "VmPeak:")):
                    got[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return got.get("VmSize"), got.get("VmPeak")
