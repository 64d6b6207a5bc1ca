#!/usr/bin/env python3
"""wild.py: models from timm and transformers that nobody here shaped kfuse
for (the GPU machine has both libraries; this one has neither).  Each is
built with random weights from its library's own definition (timm's
create_model(pretrained=False), transformers' AutoModel.from_config with
the architecture's default configuration, fewer layers and a small
vocabulary), exported as zoo.py exports (torch.onnx.export, opset 17,
TorchScript exporter) and written as NAME.onnx, NAME.in<i>.npy and
NAME.out<i>.npy, PyTorch's outputs for those inputs; in f16 and bf16 also
NAME.ref<i>.npy, the same model's outputs in f64 from its f32 weights (the
truth both low-precision results are measured against; bf16 inputs and
outputs are written as f32, numpy having no bf16).  A model PyTorch
cannot build or export is reported on stderr ("wild: NAME: export failed:
...") and skipped: that is PyTorch's failure, not kfuse's, and
bench/models/wild.sh counts it apart.

    wild.py [--out DIR] [--set timm|hf] [--only a,b] [--dtype f32|f16|bf16]
            [--device cuda|cpu] [--tiny] [--list]
"""
import argparse
import copy
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import Entry, export, randomize_norms, run, save, to_dtype  # noqa: E402

warnings.filterwarnings("ignore")

# timm: CNNs with blocks the torchvision zoo lacks (squeeze-excite variants,
# selective kernels, mixed kernel sizes, res2net splits, ghost modules,
# weight standardisation, space-to-depth, reparameterised branches) and
# vision transformers / hybrids (relative position bias, windowed and
# pooled attention, conv stems, token mixers that are not attention)
TIMM = [
    "resnet26d", "seresnext26d_32x4d", "skresnet18", "res2net50_14w_8s", "dla34", "cspresnet50",
    "densenet121", "efficientnet_b0", "mixnet_s", "mobilenetv3_large_100", "ghostnet_100", "rexnet_100",
    "regnety_002", "repvgg_a0", "dpn68", "inception_v3", "hrnet_w18_small", "convnext_atto", "convnextv2_atto",
    "nf_resnet26", "resnetv2_50x1_bit", "lcnet_050", "tresnet_m", "vgg11_bn",
    "vit_tiny_patch16_224", "deit_tiny_distilled_patch16_224", "swin_tiny_patch4_window7_224", "beit_base_patch16_224",
    "poolformer_s12", "mixer_s16_224", "levit_128s", "mobilevit_xxs", "pvt_v2_b0", "cait_xxs24_224",
    "efficientformer_l1", "edgenext_xx_small", "tiny_vit_5m_224", "eva02_tiny_patch14_224", "fastvit_t8",
    "coat_lite_tiny", "maxvit_tiny_tf_224",
]

# transformers: the encoders, decoders and encoder-decoders a user would
# bring beside the zoo's BERT, GPT-2, Llama and T5 encoder, and vision and
# audio models (model_type, what it takes)
HF = [
    ("distilbert", "text"), ("roberta", "text"), ("albert", "text"), ("electra", "text"), ("deberta-v2", "text"),
    ("mobilebert", "text"), ("mpnet", "text"), ("convbert", "text"), ("squeezebert", "text"),
    ("opt", "causal"), ("gpt_neo", "causal"), ("gptj", "causal"), ("bloom", "causal"), ("falcon", "causal"),
    ("mistral", "causal"), ("qwen2", "causal"), ("phi", "causal"), ("gemma", "causal"), ("gpt_neox", "causal"),
    ("stablelm", "causal"), ("codegen", "causal"), ("starcoder2", "causal"), ("olmo", "causal"),
    ("bart", "seq2seq"), ("t5", "seq2seq"), ("marian", "seq2seq"),
    ("vit", "image"), ("deit", "image"), ("beit", "image"), ("swin", "image"), ("convnext", "image"),
    ("dinov2", "image"), ("segformer", "image"), ("mobilevit", "image"), ("clip_vision_model", "image"),
    ("siglip_vision_model", "image"), ("resnet", "image"), ("levit", "image"),
    ("wav2vec2", "audio"), ("hubert", "audio"), ("whisper", "whisper"),
]
SEQ, VOCAB = 128, 1000


def timm_entry(name):
    import timm
    m = timm.create_model(name, pretrained=False)
    size = tuple(m.pretrained_cfg.get("input_size", (3, 224, 224)))
    g = torch.Generator().manual_seed(11)
    return Entry(randomize_norms(m, 12), [torch.randn((2,) + size, generator=g)], ["input"], ["logits"])


class HFOut(nn.Module):
    """transformers' models take keywords and return ModelOutput objects:
    positional inputs, the first tensor output."""
    def __init__(self, m, keys):
        super().__init__()
        self.m, self.keys = m, keys

    def forward(self, *xs):
        out = self.m(**dict(zip(self.keys, xs)), return_dict=True)
        return out[0]


def hf_config(kind):
    import transformers as T
    cfg = T.AutoConfig.for_model(kind)
    # the architecture's own sizes, two layers, a small vocabulary (the
    # ONNX files stay small; the embedding is a gather either way)
    for k in ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
              "num_decoder_layers"):
        if hasattr(cfg, k) and isinstance(getattr(cfg, k), int):
            setattr(cfg, k, 2)
    if kind == "gpt_neo":
        cfg.attention_types, cfg.attention_layers = [[["global", "local"], 1]], ["global", "local"]
    if hasattr(cfg, "depths") and isinstance(cfg.depths, (list, tuple)):  # hierarchical vision models
        cfg.depths = [min(d, 2) for d in cfg.depths]
    if kind == "whisper":
        cfg.max_source_positions = 256  # 512 mel frames
    if hasattr(cfg, "vocab_size") and kind not in ("whisper",):
        cfg.vocab_size = VOCAB
    for k in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        if isinstance(getattr(cfg, k, None), int) and getattr(cfg, k) >= VOCAB:
            setattr(cfg, k, 1)
    cfg.use_cache = False
    return cfg


# --tiny: widths a test fixture can hold (the same structure, a few hundred
# KB of weights): every width key an architecture's config may spell
TINY = dict(hidden_size=64, d_model=64, n_embd=64, embed_dim=64, embedding_size=64, intermediate_size=128,
            ffn_dim=128, encoder_ffn_dim=128, decoder_ffn_dim=128, d_ff=128, n_inner=128, num_attention_heads=4,
            encoder_attention_heads=4, decoder_attention_heads=4, n_head=4, num_heads=4, num_key_value_heads=2,
            d_kv=16, head_dim=16)


def tiny(cfg):
    for k, v in TINY.items():
        if isinstance(getattr(cfg, k, None), int):
            try:
                setattr(cfg, k, v)
            except AttributeError:  # a derived property (Falcon's head_dim)
                pass
    # a rotary part no wider than the new heads (GPT-J, CodeGen: 64 by default)
    if isinstance(getattr(cfg, "rotary_dim", None), int):
        cfg.rotary_dim = min(cfg.rotary_dim, TINY["head_dim"])
    return cfg


def hf_entry(kind, what, small=False):
    import transformers as T
    cfg = hf_config(kind)
    if small:
        cfg = tiny(cfg)
    try:
        m = T.AutoModel.from_config(cfg, attn_implementation="eager")
    except (TypeError, ValueError):
        m = T.AutoModel.from_config(cfg)
    m = randomize_norms(m, 13)
    g = torch.Generator().manual_seed(14)
    ids = torch.randint(2, VOCAB, (2, SEQ), generator=g)
    mask = torch.ones(2, SEQ, dtype=torch.long)
    mask[-1, SEQ - 5:] = 0  # the second sequence padded: the mask matters
    if what == "text":
        return Entry(HFOut(m, ["input_ids", "attention_mask"]), [ids, mask], ["input_ids", "attention_mask"],
                     ["last_hidden_state"])
    if what == "causal":
        # with the padding mask: without one, transformers 5 looks for
        # packed sequences with aten::diff, which the exporter lacks
        return Entry(HFOut(m, ["input_ids", "attention_mask"]), [ids, mask], ["input_ids", "attention_mask"],
                     ["last_hidden_state"])
    if what == "seq2seq":
        dec = torch.randint(2, VOCAB, (2, SEQ // 2), generator=g)
        return Entry(HFOut(m, ["input_ids", "attention_mask", "decoder_input_ids"]), [ids, mask, dec],
                     ["input_ids", "attention_mask", "decoder_input_ids"], ["last_hidden_state"])
    if what == "image":
        size = getattr(cfg, "image_size", 224)
        size = size if isinstance(size, int) else size[0]
        ch = getattr(cfg, "num_channels", 3)
        return Entry(HFOut(m, ["pixel_values"]), [torch.randn(2, ch, size, size, generator=g)], ["pixel_values"],
                     ["last_hidden_state"])
    if what == "audio":
        return Entry(HFOut(m, ["input_values"]), [torch.randn(2, 16000, generator=g)], ["input_values"],
                     ["last_hidden_state"])
    if what == "whisper":
        feats = torch.randn(2, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g)
        return Entry(HFOut(m.encoder, ["input_features"]), [feats], ["input_features"], ["last_hidden_state"])
    raise ValueError(what)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="wild")
    ap.add_argument("--set", default="timm", choices=["timm", "hf"])
    ap.add_argument("--only", default="")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="transformers' models at widths of 64 (test fixtures)")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    names = TIMM if a.set == "timm" else [k for k, _ in HF]
    if a.only:
        names = [n for n in names if n in a.only.split(",")]
    if a.list:
        print("\n".join(names))
        return 0
    os.makedirs(a.out, exist_ok=True)
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}.get(a.dtype, torch.float32)
    what = dict(HF)
    for n in names:
        t0 = time.time()
        base = n.replace("-", "_")
        try:
            torch.manual_seed(0)
            e = timm_entry(n) if a.set == "timm" else hf_entry(n, what[n], a.tiny)
            exact = copy.deepcopy(e.model).eval().to(a.device, torch.float64) if a.dtype != "f32" else None
            model = e.model.eval().to(a.device, dtype)
            xs = [x.to(a.device) for x in e.inputs]
            xs = [x.to(dtype) if x.is_floating_point() else x for x in xs]
            path = os.path.join(a.out, base)
            export(model, xs, e.input_names, e.output_names, path + ".onnx", None)
            ys = run(model, xs)
            if dtype == torch.bfloat16:  # numpy has no bf16 (kfuse-run rounds f32 inputs to it)
                xs, ys = to_dtype(xs, torch.float32), to_dtype(ys, torch.float32)
            save(path, xs, ys)
            if exact is not None:
                try:
                    ys = run(exact, [x.double() if x.is_floating_point() else x for x in xs])
                    for i, y in enumerate(ys):
                        np.save(f"{path}.ref{i}.npy", y.detach().cpu().numpy())
                except Exception as err:  # noqa: BLE001 -- no f64 truth for this one; the f16 check stands
                    print(f"wild: {base}: no f64 reference: {type(err).__name__}", file=sys.stderr, flush=True)
                del exact
            print(f"wild: {base}: exported in {time.time() - t0:.1f} s", flush=True)
        except Exception as err:  # noqa: BLE001 -- PyTorch's failure on one model; the rest go on
            msg = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
            print(f"wild: {base}: export failed: {type(err).__name__}: {msg}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
