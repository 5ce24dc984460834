"""Errors the CLI prints on one line: usage errors (exit status 2) and runs that failed for a stated reason (1)."""


class ComposerUsageError(ValueError):
    """Bad user input (pattern, preset, config value). The message names the problem and the fix."""


class PatternError(ComposerUsageError):
    """A layer pattern that does not parse or uses an unknown primitive."""


class ConfigError(ComposerUsageError):
    """An architecture config, preset or option that is invalid or unknown."""


class ComposerRunError(RuntimeError):
    """A run that could not produce its result (e.g. training diverged); the message says why and what to try."""


# Modules that moved when composer/ was sorted into rooms (issue 28): old dotted path -> new. Importing an old
# path, or naming one in a ``module:factory`` string, fails with one line that names the new path.
MOVED_MODULES = {
    "composer.baselines": "composer.layouts",
    "composer.bench_inference": "composer.evaluation.bench_inference",
    "composer.downstream": "composer.evaluation.downstream",
    "composer.export": "composer.interop.export",
    "composer.formats": "composer.interop.formats",
    "composer.hf_import": "composer.interop.hf_import",
    "composer.hf_remote": "composer.interop.hf_remote",  # and its modules, whose import fails on it
    "composer.hybridize": "composer.hybridize.student",  # now the room; its functions live in .student
    "composer.supernet": "composer.hybridize.supernet",
    "composer.placement_search": "composer.experiments.placement_search",
    "composer.training.distill": "composer.hybridize.distill",
    "composer.pipeline": "composer.experiments.pipeline",
    "composer.transfer": "composer.experiments.transfer",
    "composer.lr_sweep": "composer.experiments.lr_sweep",
    "composer.replicates": "composer.experiments.replicates",
    "composer.search_rates": "composer.experiments.search_rates",
    "composer.runlock": "composer.training.runlock",
    "scaling.baselines": "scaling.matching",
}


def moved_module_error(module: str, attribute: str | None = None) -> ModuleNotFoundError | None:
    """The one-line error for ``module`` (and ``attribute`` of it) if it moved, else None."""
    new = MOVED_MODULES.get(module)
    if new is None:
        return None
    old, where = (module, new) if attribute is None else (f"{module}:{attribute}", f"{new}:{attribute}")
    return ModuleNotFoundError(f"{old} moved to {where} (issue 28: composer/ in rooms)", name=module)


class MovedModuleFinder:
    """Last on ``sys.meta_path``: asked only for a module no other finder found, it fails naming the new path of
    one in :data:`MOVED_MODULES` and leaves every other name to the usual ``No module named`` error."""

    def find_spec(self, fullname: str, path=None, target=None):
        error = moved_module_error(fullname)
        if error is not None:
            raise error
