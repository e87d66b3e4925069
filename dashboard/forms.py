"""The pages' POST forms, parsed with django.forms: each field's type, bounds
and wording in one place, and problems as "field: message" lines (the same
shape as the engine's and the API's). The services still check what they own
(names, splits, specs); a form only turns posted text into typed values."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core import validators

from dashboard.lib.storable import without_nul
from optimizer.tasksets.files import (
    FORMATS,
    DefaultSplit,
    FieldMapping,
)
from optimizer.tasksets.models import Split
from verifiers_app.engine import SpecError
from verifiers_app.services import spec_from_json

NUL_MESSAGE = "contains a NUL character (U+0000), which cannot be stored"
WHOLE = {"invalid": "must be a whole number", "min_value": "must not be negative"}
NUMBER = {"invalid": "must be a number", "min_value": "must not be negative"}


def Text(*, allow_nul: bool = False, **kwargs) -> forms.CharField:  # noqa: N802 - used like a field class
    """A text field whose NUL refusal reads like every other one of ours.
    `allow_nul` leaves it to the JSON reader behind it, which names the field inside."""
    messages = {"null_characters_not_allowed": NUL_MESSAGE, **kwargs.pop("error_messages", {})}
    field = forms.CharField(
        required=kwargs.pop("required", False), error_messages=messages, **kwargs
    )
    if allow_nul:
        field.validators = [
            v
            for v in field.validators
            if not isinstance(v, validators.ProhibitNullCharactersValidator)
        ]
    return field


class ProblemsForm(forms.Form):
    def problems(self) -> list[str]:
        """Every error as "field: message" (a form-wide error without a field)."""
        return [
            str(message) if field == "__all__" else f"{field}: {message}"
            for field, messages in self.errors.items()
            for message in messages
        ]


class RunControlForm(ProblemsForm):
    """Resume (more budget) and fork (from which candidate)."""

    extra_budget = forms.IntegerField(required=False, min_value=0, error_messages=WHOLE)
    candidate = forms.IntegerField(required=False, min_value=0, error_messages=WHOLE)


class RunAnnotateForm(ProblemsForm):
    tags = Text(strip=False)  # comma-separated; run_annotate checks each tag
    notes = Text(strip=False)

    def tag_list(self) -> list[str]:
        return self.cleaned_data["tags"].split(",")


class RunArchiveForm(ProblemsForm):
    archived = forms.TypedChoiceField(
        choices=[("1", "archive"), ("0", "bring back")],
        coerce=lambda v: v == "1",
        required=False,
        empty_value=True,  # type: ignore[arg-type]  # django-stubs: str | None; Django takes any value
    )


class PromotionForm(ProblemsForm):
    candidate = forms.IntegerField(
        min_value=0, error_messages={**WHOLE, "required": "choose a candidate"}
    )


class RunImportForm(ProblemsForm):
    """The compare page's run import: one exported run JSON file (or gepa's
    gepa_state.bin), at most `max_bytes` long; what is inside is read by the
    import services, which name the field inside the file."""

    file = forms.FileField(
        allow_empty_file=True,
        error_messages={
            "required": "choose an exported run JSON file.",
            "invalid": "choose an exported run JSON file.",
        },
    )

    def __init__(self, data=None, files=None, *, max_bytes: int, **kwargs):
        super().__init__(data, files, **kwargs)
        self.max_bytes = max_bytes

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > self.max_bytes:
            raise forms.ValidationError(
                f"{upload.size} bytes is more than the {self.max_bytes // (1024 * 1024)} MB limit."
            )
        return upload


class ApiTokenForm(ProblemsForm):
    name = Text(
        required=True,
        max_length=100,
        error_messages={
            "required": "give the token a name, e.g. the script that will use it",
            "max_length": "at most 100 characters",
        },
    )


class SplitForm(ProblemsForm):
    """Deal a task set's tasks into train / val / holdout by ratios, with a seed."""

    train = forms.FloatField(required=False, min_value=0, error_messages=NUMBER)
    val = forms.FloatField(required=False, min_value=0, error_messages=NUMBER)
    holdout = forms.FloatField(required=False, min_value=0, error_messages=NUMBER)
    seed = forms.IntegerField(required=False, error_messages=WHOLE)

    def ratios(self) -> dict[str, float] | None:
        """The ratios given (an empty one is 0), or None when none is: by the default rule."""
        if all(self.cleaned_data.get(split) is None for split in Split.values):
            return None
        return {split: self.cleaned_data[split] or 0.0 for split in Split.values}


class AssignSplitForm(ProblemsForm):
    task_ids = forms.MultipleChoiceField(
        required=False
    )  # any ids: taskset_assign_split checks them
    split = forms.ChoiceField(
        choices=Split.choices,
        error_messages={
            "required": "choose a split",
            "invalid_choice": f"use one of {', '.join(Split.values)}",
        },
    )

    def __init__(self, data, **kwargs):
        super().__init__(data, **kwargs)
        cast(forms.MultipleChoiceField, self.fields["task_ids"]).choices = [
            (value, value) for value in data.getlist("task_ids")
        ]


class VerifierForm(ProblemsForm):
    """The verifier editor: the spec as JSON text or a file, sharing, test cases."""

    spec = Text(strip=False, allow_nul=True)
    spec_file = forms.FileField(required=False, allow_empty_file=True)
    shared = forms.BooleanField(required=False)
    test_cases = Text(strip=False, allow_nul=True)


class TaskImportForm(ProblemsForm):
    """A task-set import's options (upload, preview and confirm pages): the set's
    name, the file format, the field mapping (`<field>_field`: which source key
    fills each task field), the default split of rows without one, sharing."""

    name = Text(allow_nul=True)  # taskset_import checks the name (and says so on the preview)
    format = forms.ChoiceField(
        required=False,
        choices=[("", "detect"), *((f, f) for f in FORMATS)],
        error_messages={"invalid_choice": f"use one of {', '.join(FORMATS)}"},
    )
    split_seed = forms.IntegerField(required=False, error_messages=WHOLE)
    shared = forms.BooleanField(required=False)

    def __init__(self, data, **kwargs):
        super().__init__(data, **kwargs)
        for name in FieldMapping.names():
            self.fields[f"{name}_field"] = Text(
                allow_nul=True
            )  # a key name: NULs dropped, cut at 200 (options)
        for split in Split.values:
            self.fields[f"default_{split}"] = forms.FloatField(
                required=False, min_value=0, error_messages=NUMBER
            )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        # No ratio given: the default rule (rule_ratios). Once one is given, an empty one is 0.
        given = {split: data.get(f"default_{split}") for split in Split.values}
        ratios = (
            None
            if all(r is None for r in given.values())
            else {split: r or 0.0 for split, r in given.items()}
        )
        try:
            data["default_split"] = DefaultSplit(ratios=ratios, seed=data.get("split_seed") or 0)
        except SpecError as exc:
            self.add_error(None, f"default split: {exc}")
        return data

    @staticmethod
    def defaults() -> dict:
        return {"name": "", "fmt": "", "mapping": FieldMapping(), "default_split": DefaultSplit()}

    def options(self) -> dict:
        """What taskset_import and its preview take (call after is_valid)."""
        data = self.cleaned_data
        mapping = FieldMapping(
            **{
                name: without_nul(data.get(f"{name}_field", "")).strip()[:200]
                for name in FieldMapping.names()
            }
        )
        return {
            "name": data.get("name", ""),
            "fmt": data.get("format", ""),
            "mapping": mapping,
            "default_split": data.get("default_split") or DefaultSplit(),
        }


class TaskForm(ProblemsForm):
    """One task's edit form: its input text and its JSON fields as text (read by
    the JSON reader, which names the field: "expected: not valid JSON …"); the
    split and the row's contents are checked by task_update."""

    input = Text(strip=False, allow_nul=True)
    expected = Text(allow_nul=True)
    params = Text(allow_nul=True)
    metadata = Text(allow_nul=True)
    verifier = Text(allow_nul=True)
    split = Text(allow_nul=True)

    def json_field(self, name: str, empty):
        """The field's JSON value; `empty` when left blank. SpecError names the field."""
        text = self.cleaned_data[name]
        return spec_from_json(text, source=name) if text else empty


class TaskImportUploadForm(TaskImportForm):
    """Step 1 of a task-set import: the options and the file, at most `max_bytes` long."""

    def __init__(self, data=None, files=None, *, max_bytes: int, **kwargs):
        super().__init__(data, files=files, **kwargs)
        self.max_bytes = max_bytes
        self.fields["file"] = forms.FileField(
            allow_empty_file=True,
            error_messages={
                "required": "choose a .jsonl, .json, .yaml, .csv or .tsv file",
                "invalid": "choose a .jsonl, .json, .yaml, .csv or .tsv file",
            },
        )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > self.max_bytes:
            raise forms.ValidationError(f"larger than {self.max_bytes // (1024 * 1024)} MB")
        return upload


class TaskImportConfirmForm(TaskImportForm):
    """Step 3 of a task-set import: the options shown on the preview, the kept
    upload's token and whether the new set is shared."""

    token = Text()  # upload_path checks it ("file: this preview has expired …")
