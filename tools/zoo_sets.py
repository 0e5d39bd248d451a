"""The model zoo's names and sets, shared by export_zoo.py (torch) and zoo_reference.py (onnxruntime).

Plain Python on purpose: zoo_reference.py runs in the virtualenv, which has no torch.
"""

ALL_MODELS = [
    "lenet", "googlenet", "resnet18", "resnet50", "vgg16", "mobilenetv2", "mnasnet",
    "densenet161", "ssd_mobilenet", "unet_tiny",
    "bert_base", "bert_tiny", "gpt2", "gpt2_tiny", "roberta_base", "roberta_tiny",
]

SETS = {
    # What CI exports and tests on every run: must stay fast on 2 cores.
    "ci": ["lenet", "resnet18", "mobilenetv2", "unet_tiny", "bert_tiny", "gpt2_tiny",
           "roberta_tiny"],
    "full": ALL_MODELS,
}


def select(models_arg, set_arg):
    """Model names from --models a,b (wins) or --set NAME; exits on an unknown name."""
    if models_arg:
        names = [m.strip() for m in models_arg.split(",") if m.strip()]
    else:
        if set_arg not in SETS:
            raise SystemExit(f"unknown set '{set_arg}' (known: {', '.join(SETS)})")
        names = list(SETS[set_arg])
    unknown = [n for n in names if n not in ALL_MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(ALL_MODELS)})")
    return names
