"""tf.distribute strategies behind `--distribution_strategy`: the scale-out engine.

one_device (one CPU or GPU), mirrored (the GPUs of one host), multi_worker_mirrored
(several hosts, configured by the TF_CONFIG environment variable) and tpu (with
`--tpu`, a TPU name or address). We never write our own all-reduce.

A worker of a multi-worker cluster that dies (killed, preempted, its host gone) is
noticed by TensorFlow's coordination service, whose leader (the chief, else worker 0)
hears every worker's heartbeats: a worker silent for longer than the heartbeat timeout
(`--heartbeat_timeout`, seconds; TensorFlow's own default where unset) is
reported to the others, whose collective operations are then aborted (and a worker that
loses the leader, or a peer in the middle of an exchange, has its collectives fail at
once). `peer_loss_stops` turns that abort into `PeerLost`, one line that says what
happened and what to do: start the cluster again with the same command, which resumes
from the last checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Callable

import keras
import tensorflow as tf
from absl import logging

from albert_tf.data.graph import graph_function
from albert_tf.errors import UserError, short_reason

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


class DistributionError(UserError):
    """A strategy that cannot be built, or a batch that does not fit it."""


class PeerLost(DistributionError):
    """Another worker of a multi-worker cluster stopped while this one needed it."""


def get_strategy(name: str = "one_device", *, tpu: str | None = None,
                 num_gpus: int | None = None,
                 heartbeat_timeout: float | None = None) -> tf.distribute.Strategy:
    """The strategy named by `--distribution_strategy`; `num_gpus`: mirrored's first
    GPUs of the host (None: all); `heartbeat_timeout`: how long (seconds) a worker of
    multi_worker_mirrored may stay silent before it is lost (None: TensorFlow's
    default)."""
    check_heartbeat_timeout(heartbeat_timeout)
    if name not in STRATEGIES:
        raise DistributionError(
            f"unknown distribution_strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    if num_gpus is not None and name != "mirrored":
        raise DistributionError(f"--num_gpus is for --distribution_strategy=mirrored, "
                                f"not {name}")
    if name == "one_device":
        device = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
        if num_gpus is not None:
            if num_gpus > len(gpus):
                raise DistributionError(f"--num_gpus={num_gpus}: this host has "
                                        f"{len(gpus)} GPU(s)")
            gpus = gpus[:num_gpus]
        devices = gpus or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker_mirrored":
        if "TF_CONFIG" not in os.environ:
            raise DistributionError(
                "multi_worker_mirrored needs the TF_CONFIG environment variable "
                "(cluster and task of this worker)")
        try:
            json.loads(os.environ["TF_CONFIG"])
        except ValueError as e:
            raise DistributionError(f"TF_CONFIG is not valid JSON: {e}") from None
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        _configure_heartbeats(resolver.cluster_spec(), heartbeat_timeout)
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    if not tpu:
        raise DistributionError("distribution_strategy=tpu needs --tpu (name or address)")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as e:  # no TPU by that name here
        raise DistributionError(
            f"--tpu={tpu}: no TPU found there ({type(e).__name__}: {short_reason(e)}); "
            "on a machine without a TPU, leave --distribution_strategy=tpu out") from None
    return tf.distribute.TPUStrategy(resolver)


def set_threads(intra_op: int | None, inter_op: int | None) -> None:
    """`--intra_op_threads` and `--inter_op_threads` (None: TensorFlow's own). TensorFlow
    takes them only before it starts in the process: a different value after that is a
    DistributionError naming the flag."""
    threading = tf.config.threading
    if intra_op is None and inter_op is None:
        return
    for flag, value, get, set_ in (
            ("intra_op_threads", intra_op, threading.get_intra_op_parallelism_threads,
             threading.set_intra_op_parallelism_threads),
            ("inter_op_threads", inter_op, threading.get_inter_op_parallelism_threads,
             threading.set_inter_op_parallelism_threads)):
        if value is None or value == get():
            continue
        try:
            set_(value)
        except RuntimeError:
            raise DistributionError(
                f"--{flag}={value}: TensorFlow has started in this process already; "
                f"from Python, call tf.config.threading.set_{flag.split('_threads')[0]}"
                "_parallelism_threads before anything else of TensorFlow") from None
    logging.info("TensorFlow's threads: %d within an op, %d ops at once (0: its own)",
                 threading.get_intra_op_parallelism_threads(),
                 threading.get_inter_op_parallelism_threads())


def check_heartbeat_timeout(seconds: float | None) -> None:
    """`--heartbeat_timeout`: None (TensorFlow's default) or a positive number of
    seconds; DistributionError otherwise."""
    if seconds is not None and not 0 < seconds < float("inf"):
        raise DistributionError(f"--heartbeat_timeout={seconds}: give the seconds a "
                                "worker may stay silent, a positive number")


def _configure_heartbeats(cluster_spec: tf.train.ClusterSpec, seconds: float | None):
    """The coordination service that MultiWorkerMirroredStrategy configures itself (a
    standalone service on the chief, else worker 0, coordinating the chief and the
    workers), with a heartbeat timeout of `seconds`; with None, nothing: the strategy
    configures it with TensorFlow's default. Before the strategy is created, which
    then keeps this configuration."""
    if seconds is None:
        return
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    if context.context().coordination_service is not None:
        logging.warning("--heartbeat_timeout is not applied: the coordination service "
                        "is already configured")
        return
    jobs = [coordination_config_pb2.CoordinatedJob(name=job,
                                                   num_tasks=cluster_spec.num_tasks(job))
            for job in ("chief", "worker") if job in cluster_spec.jobs]
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(cluster_spec),
        coordinated_jobs=jobs, heartbeat_timeout_in_ms=max(1, round(seconds * 1000)))
    logging.info("multi_worker_mirrored: a worker silent for %g s is lost", seconds)


# What a collective operation raises when TensorFlow aborts it because a peer is gone:
# the coordination service's report of missed heartbeats and a peer's closed connection
# (UnavailableError), a collective's timeout (DeadlineExceededError), an aborted or
# cancelled exchange.
PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
               tf.errors.AbortedError, tf.errors.CancelledError)


@contextlib.contextmanager
def peer_loss_stops(strategy: tf.distribute.Strategy, where: str,
                    resume_from: Callable[[], str | None] | None = None):
    """Runs the block; under a strategy whose replicas span workers, a collective
    operation aborted because a peer is gone (`PEER_ERRORS`) becomes `PeerLost`, whose
    one line says what happened (`where`: "in training step 7", ...; the lost
    worker, as TensorFlow names it) and what to do (the same command again on every
    worker, resuming from `resume_from()`, the last checkpoint, when given)."""
    try:
        yield
    except PEER_ERRORS as e:
        if not spans_workers(strategy):
            raise
        raise PeerLost(peer_lost_message(strategy, e, where, resume_from)) from None


def peer_lost_message(strategy, error: tf.errors.OpError, where: str,
                      resume_from: Callable[[], str | None] | None = None) -> str:
    """`PeerLost`'s line: which worker (TensorFlow's task names other than this
    worker's, when its message has them) was lost `where`, why as TensorFlow says it,
    and what to do."""
    resolver = strategy.cluster_resolver
    me = (resolver.task_type, int(resolver.task_id))
    text = error.message or ""
    tasks = dict.fromkeys((job, int(index)) for job, index in
                          re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", text))
    peers = [f"{job} {index}" for job, index in tasks if (job, index) != me]
    if "stopped sending heartbeats" in text:
        why = "it stopped sending heartbeats"
    elif "Socket closed" in text or "Connection reset" in text or \
            "failed to connect" in text.lower() or "connection refused" in text.lower():
        why = "its connection closed"
    else:
        why = f"{type(error).__name__}: {_first_line(text)}"
    checkpoint = resume_from() if resume_from is not None else None
    resume = (f"training resumes from {os.path.basename(checkpoint)}" if checkpoint
              else "training resumes from the last checkpoint, if any")
    return (f"lost {' and '.join(peers) or 'a peer worker'} of the multi_worker_mirrored "
            f"cluster {where} ({why}); this {me[0]} {me[1]} stops too. Start the "
            f"cluster again with the same command on every worker: {resume}")


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:200] if lines else "no message"


def per_replica_batch_size(global_batch_size: int, strategy: tf.distribute.Strategy,
                           flag: str = "train_batch_size") -> int:
    """The batch each replica reads; the global batch must divide over the replicas."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size < 1 or global_batch_size % replicas:
        raise DistributionError(
            f"--{flag}={global_batch_size} does not divide over the {replicas} replicas "
            f"of the {type(strategy).__name__}: use a multiple of {replicas}")
    return global_batch_size // replicas


def _on_the_host(strategy: tf.distribute.Strategy) -> bool:
    """Whether `strategy` is one device, this process's CPU: its steps read a dataset's
    batches where they are (a distributed dataset's iterator, made for each training
    loop, evaluation and prediction, cost 0.12 s against 0.01 s for the tiny models of
    the tests on a 2-core AVX2 machine, 2026-12-02)."""
    if not isinstance(strategy, tf.distribute.OneDeviceStrategy):
        return False
    devices = strategy.extended.worker_devices
    return len(devices) == 1 and tf.DeviceSpec.from_string(devices[0]).device_type == "CPU"


def distribute_dataset(strategy: tf.distribute.Strategy, dataset: tf.data.Dataset):
    """`dataset`, a stream of global batches, as the strategy's replicas read it.

    Every worker reads the whole input and each replica takes its rows of each global
    batch (replica i the i-th of equal parts, the last ones shorter or empty where the
    batch is), so the replicas together see exactly the batches one process would, in
    the same order, whatever the number of input files or hosts: several hosts train as
    one does and resume at the same batch. (tf.data's own auto-sharding shards by files,
    which the scripts' single record file cannot be, and gives other batches for another
    file count.) The parts keep the global batch's padded length; a static batch size
    stays static (TPUs)."""
    replicas = strategy.num_replicas_in_sync
    if _on_the_host(strategy):  # the batches as they are: no copy to make, no split
        return dataset
    if replicas == 1:  # the whole batch: nothing to split (no per-batch dataset)
        return strategy.distribute_datasets_from_function(lambda context: dataset)
    batch_size = tf.nest.flatten(dataset.element_spec)[0].shape[0]

    def part(batch, replica):
        if batch_size is not None and batch_size % replicas == 0:  # static: TPUs
            size = batch_size // replicas

            def rows(t):
                parts = tf.reshape(t, tf.concat([[replicas, size], tf.shape(t)[1:]], 0))
                return tf.ensure_shape(parts[replica], [size, *t.shape[1:]])

            return tf.nest.map_structure(rows, batch)
        rows = tf.shape(tf.nest.flatten(batch)[0])[0]
        size = (rows + replicas - 1) // replicas
        start = tf.minimum(tf.cast(replica, tf.int32) * size, rows)
        stop = tf.minimum(start + size, rows)
        return tf.nest.map_structure(lambda t: t[start:stop], batch)

    host_devices = _several_host_devices(strategy)  # see _NO_DEVICE_BUFFER

    def replica_batches(context: tf.distribute.InputContext) -> tf.data.Dataset:
        local = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * local
        source = dataset.with_options(_NO_AUTOTUNING) if host_devices else dataset
        return source.flat_map(graph_function(lambda batch: tf.data.Dataset.range(
            first, first + local).map(graph_function(lambda replica: part(batch, replica)))))

    return strategy.distribute_datasets_from_function(
        replica_batches, _NO_DEVICE_BUFFER if host_devices else None)


def _several_host_devices(strategy: tf.distribute.Strategy) -> bool:
    """Whether the strategy's replicas on this host are on several devices, not a
    TPU's."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return False
    try:
        return len(strategy.extended.worker_devices) > 1
    except RuntimeError:  # the default strategy: no devices of its own
        return False


# Deleting the iterator of a strategy over several devices of one host (TF 2.21's
# MultiDeviceIterator) waits for tf.data's autotuning threads, of the host pipeline and
# of each device's prefetch buffer, until their next wake-up: seconds once the iterator
# has been idle, with the CPU idle. A mirrored pretraining run over 2 logical CPUs ended
# with such a hang of 2 to 22 s in about half the runs; with both settings below, 1 run
# in 21 (3 s). (A one-device iterator does not wait.) So, where the strategy has several
# devices on a host, outside TPUs (whose infeed wants the buffers), its iterator gets no
# per-device buffer (the replicas' parts are a few int32 arrays that the host pipeline,
# still prefetching, hands over in microseconds), and the host pipeline no autotuning
# model: its AUTOTUNE maps then run as many calls at once as there are cores (at most
# 16, tf.data's starting value).
_NO_DEVICE_BUFFER = tf.distribute.InputOptions(experimental_per_replica_buffer_size=0)
_NO_AUTOTUNING = tf.data.Options()
_NO_AUTOTUNING.autotune.enabled = False


def spans_workers(strategy: tf.distribute.Strategy) -> bool:
    """Whether the strategy's replicas are on more than one host (TF_CONFIG's chief and
    workers, or a TPU pod's hosts)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return False
    jobs = resolver.cluster_spec().as_dict()
    return sum(len(jobs.get(job, ())) for job in ("chief", "worker")) > 1


def barrier(strategy: tf.distribute.Strategy) -> None:
    """Returns once every worker has reached it: what the chief wrote before it (a
    checkpoint, model.ckpt-best) is whole for every worker after it. (One all-reduce of
    a scalar, in a tf.function as TPUs want it; nothing to wait for on one host.)"""
    if not spans_workers(strategy):
        return

    @tf.function(autograph=False)
    def all_here():
        return strategy.reduce(tf.distribute.ReduceOp.SUM,
                               strategy.run(lambda: tf.constant(1.0)), axis=None)

    with peer_loss_stops(strategy, "waiting for every worker"):
        all_here()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints, summaries and results."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (task_type == "worker" and task_id == 0 and
                                    "chief" not in resolver.cluster_spec().as_dict())


def use_xla(enable_xla: bool, strategy: tf.distribute.Strategy) -> bool:
    """XLA for the gradient computation, unless the strategy cannot run it.

    MirroredStrategy over several logical CPU devices cannot run a whole XLA-compiled
    gradient computation; there we turn it off and say so. XLA stays inside the pure
    functions of `albert_tf.modeling.fused` (GELU, LayerNorm, the optimizer update), which run
    under any strategy. Under mixed_bfloat16 on CPUs it stays on, with a warning: XLA's
    CPU matmuls ran bfloat16 no faster than float32 on an AVX512_BF16 CPU, where
    TensorFlow's own (oneDNN) ran it twice as fast, and the step 2.1x slower with XLA
    than without (BENCHMARKS.md).
    """
    if not enable_xla:
        return False
    on_cpu = (not tf.config.list_logical_devices("GPU") and
              not isinstance(strategy, tf.distribute.TPUStrategy))
    if on_cpu and keras.mixed_precision.global_policy().compute_dtype == "bfloat16":
        logging.warning("--enable_xla with mixed_bfloat16 on CPU: XLA's CPU matmuls "
                        "run bfloat16 no faster than float32; without --enable_xla, "
                        "where the CPU has bfloat16 instructions, training runs up to "
                        "about 2x faster")
    replicas_on_cpu = strategy.num_replicas_in_sync > 1 and on_cpu
    if replicas_on_cpu:
        logging.warning("--enable_xla is off: XLA cannot run under %s over %d CPU "
                        "devices (GELU, LayerNorm and the optimizer update stay XLA "
                        "kernels)", type(strategy).__name__,
                        strategy.num_replicas_in_sync)
        return False
    return True
