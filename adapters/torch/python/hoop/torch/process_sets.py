"""Process sets for hoop.torch: the framework-neutral ones of hoop._process_sets."""

from hoop._process_sets import (ProcessSet, add_process_set, global_process_set,  # noqa: F401
                                invalidate_all, remove_process_set, root_in_set, set_id,
                                setup_global)
