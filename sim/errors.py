"""The three error kinds a user can cause. The CLI prints them as one line, exit 2."""


class DcsimError(Exception):
    """Base class of every error caused by user input (scenario, traces, policies)."""


class ScenarioError(DcsimError):
    """A scenario file, a key in it or an override is invalid."""


class TraceError(DcsimError):
    """A data file (carbon trace, job file) is malformed; the message names file and line."""


class PolicyError(DcsimError):
    """A policy returned an action the engine cannot apply; the message names the action."""
