"""The controller's event vocabulary: what kind of thing happened and a machine-readable reason for it.

Decisions carry the policy's own codes (``Reason``, ``PreemptReason``, ``AdmittedAs``); observations carry the
codes below. Both are written verbatim to the store's event log, which users and the simulator read.
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    ADMIT = "admit"              # decision: bound and launched
    PREEMPT = "preempt"          # decision: signalled by the policy (reason: a PreemptReason)
    WAIT = "wait"                # decision: why a pending job waits (written when the reason changes)
    RESERVE = "reserve"          # decision: nodes reserved for a job from a time on (written when it changes)
    RELABEL = "relabel"          # decision: a running job counts as borrowed now (non-preemptible work took its quota)
    STOP = "stop"                # the controller's own signal: cancel, readiness timeout, failure, straggler
    RUNNING = "running"          # observation: every pod started
    POD_EXIT = "pod_exit"        # observation: a pod exited non-zero (the job's own fault)
    POD_FAILED = "pod_failed"    # observation: the infrastructure lost a pod
    CHECKPOINT = "checkpoint"    # observation: a checkpoint was written
    NODE_HEALTH = "node_health"  # a node's health changed
    REQUEUE = "requeue"          # a job went back to its queue
    FINISH = "finish"            # a job ended (reason: its final state)
    ADOPT = "adopt"              # recovery: a running gang was taken over
    LEADERSHIP = "leadership"    # this controller lost the lease


class Why(StrEnum):
    ALL_PODS_STARTED = "AllPodsStarted"
    EXIT_CODE = "ExitCode"
    NODE_LOST = "NodeLost"
    CHECKPOINT_WRITTEN = "CheckpointWritten"
    SLOW_RANK = "SlowRank"
    STRAGGLER_MOVE = "StragglerMove"
    READINESS_TIMEOUT = "ReadinessTimeout"
    CANCEL_REQUESTED = "CancelRequested"
    PREEMPTED = "Preempted"
    OWN_FAULT = "OwnFault"
    LOST_ON_RESTART = "LostOnRestart"
    LAUNCH_FAILED = "LaunchFailed"
    BIND_REJECTED = "BindRejected"
    ADOPTED = "Adopted"
    STALE_LEADER = "StaleLeader"
