"""The tiny teacher and its students that the hybridize tests share."""

from __future__ import annotations

import torch

from composer.hybridize.student import init_student, student_arch
from composer.model import build_model
from composer.presets import get_preset

TEACHER = get_preset("tiny").arch.replace(pattern="AMAMAM", n_heads=4, n_kv_heads=2, head_dim=16)


def teacher_model(seed: int = 0):
    torch.manual_seed(seed)
    return build_model(TEACHER).eval()


def student_of(pattern: str, teacher):
    model = build_model(student_arch(TEACHER, pattern)).eval()
    notes = init_student(model, TEACHER, teacher.state_dict())
    return model, notes
