package org.tserve.wlm.supervision;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.logging.log4j.Logger;
import org.apache.logging.log4j.ThreadContext;
import org.tserve.dist.DeviceReservation;
import org.tserve.dist.TorchrunOptions;
import org.tserve.util.BoundedLines;
import org.tserve.util.Logging;

/**
 * One Python backend process ({@code python -m ts.model_service_worker}) or torchrun job: launch,
 * log copying (every line into the model log, prefixed with worker and model, and for a torchrun
 * job with the rank), and killing its whole process tree.
 */
public final class WorkerProcess {
    private static final Logger MODEL_LOG = Logging.named(Logging.MODEL_LOG);
    private static final Logger LOG = Logging.logger(WorkerProcess.class);
    private static final int TAIL = 20;

    private final Process process;
    private final String prefix;
    /** The model, for the model log's context (ThreadContext {@code model}). */
    private final String modelName;
    private final Deque<String> stderrTail = new ArrayDeque<>();
    private volatile boolean started;
    private volatile long workerPid = -1;
    private final List<Thread> pumps = new ArrayList<>();

    /** Environment variable naming the worker in every process of a torchrun job. */
    static final String TAG_VAR = "TSERVE_WORKER_TAG";
    /** torchrun's {@code --tee} prefix: {@code [default<local rank>]:}. */
    private static final Pattern TEE = Pattern.compile("^\\[default(\\d+)\\]:(.*)$");
    /** Tag of a torchrun job's processes, or null for a plain worker. */
    private final String tag;
    /** {@link #TAG_VAR}'s value in every process this worker starts (its handler's children too). */
    private final String treeTag;
    /** How long the worker's leftover processes get between SIGTERM and SIGKILL when it stops. */
    static final long TREE_GRACE_MS = 2000;
    /** Global rank of local rank 0, added to torchrun's local rank in the log prefix. */
    private volatile int rankOffset;
    /** The ranks' latest stderr lines (torchrun's own summary excluded): why a rank failed to start. */
    private final Deque<String> rankTail = new ArrayDeque<>();
    /** (MASTER_ADDR, MASTER_PORT) of every attempt the ranks ran with, for DeepSpeed's shm files. */
    private final java.util.Set<String> shmPrefixes = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private WorkerProcess(Process process, String prefix, String modelName, String tag, String treeTag) {
        this.process = process;
        this.prefix = prefix;
        this.modelName = modelName;
        this.tag = tag;
        this.treeTag = treeTag;
    }

    /** The Unix socket path of a worker port. */
    static Path socketPath(WorkerEnvironment env, int port) {
        return env.socketDir.resolve(".ts.sock." + port);
    }

    /**
     * Launches a worker: a plain {@code <python> -m ts.model_service_worker}, or for pp/tp/pptp
     * one torchrun agent ({@link TorchrunOptions#command}) whose ranks listen on socket
     * {@code port + local rank}.
     *
     * @param devices the worker's reserved devices (CUDA_VISIBLE_DEVICES), or null
     * @param rdzvPort the rendezvous port of a torchrun job (from initial_distribution_port)
     */
    static WorkerProcess start(WorkerEnvironment env, ServedModel model, int port, String workerName,
                               DeviceReservation devices, int rdzvPort) throws IOException {
        return start(env, model, port, workerName, devices, rdzvPort, model.dist, null);
    }

    /**
     * As above, with the torchrun options of this node ({@link TorchrunOptions#forNode} for a job
     * across machines) and the run id every node of the job shares (null: the default one).
     */
    static WorkerProcess start(WorkerEnvironment env, ServedModel model, int port, String workerName,
                               DeviceReservation devices, int rdzvPort, TorchrunOptions dist, String jobRunId)
            throws IOException {
        boolean torchrun = dist.usesTorchrun();
        List<String> workerArgs = new ArrayList<>();
        if (env.useTcp) {
            workerArgs.addAll(List.of("--sock-type", "tcp", "--host", "127.0.0.1", "--port", String.valueOf(port)));
        } else {
            for (int r = 0; r < dist.ranks(); r++) {
                Files.deleteIfExists(socketPath(env, port + r));
            }
            workerArgs.addAll(List.of("--sock-type", "unix", "--sock-name", socketPath(env, port).toString()));
        }
        if (env.metricsConfig != null && !env.metricsConfig.isEmpty()) {
            workerArgs.addAll(List.of("--metrics-config", env.metricsConfig));
        }
        // a model with useVenv runs on its venv's python (created at registration), never forked
        // from the zygote, which imported packages the venv may replace
        boolean venv = model.getSettings().useVenv;
        String python = venv ? model.getArchive().getVenvPython().toString() : env.python;
        List<String> cmd;
        if (torchrun) {
            Path logDir = Logging.logDir().toPath().resolve("torchelastic_ts");
            // the nodes of a multi-node job must agree on the run id; their ports may differ
            String runId = jobRunId != null ? jobRunId
                    : dist.nnodes > 1 ? model.name + "_" + model.version : model.name + "_" + port;
            cmd = new ArrayList<>(List.of(python, "-m", "ts.utils.die_with_parent",
                    String.valueOf(ProcessHandle.current().pid()), "--"));
            // the agent dies with this frontend (PR_SET_PDEATHSIG), even when it is SIGKILLed
            cmd.addAll(dist.command(python, runId, "127.0.0.1:" + rdzvPort, logDir.toString(), workerArgs));
        } else if (!venv && env.warmStart != null && env.warmStart.isAlive()
                && !Files.isDirectory(model.getArchive().getDepsDir())) {
            // forked from the zygote; not with per-model packages, which may shadow what it imported
            cmd = env.warmStart.command(env.python, workerArgs);
        } else {
            cmd = new ArrayList<>(List.of(python, "-m", "ts.model_service_worker"));
            cmd.addAll(workerArgs);
        }
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.directory(model.getArchive().getModelDir().toFile());
        Map<String, String> e = pb.environment();
        if (!env.envBlacklist.isEmpty()) {
            Pattern p = Pattern.compile(env.envBlacklist);
            e.keySet().removeIf(k -> p.matcher(k).matches());
        }
        List<String> path = new ArrayList<>();
        Path deps = model.getArchive().getDepsDir();
        if (Files.isDirectory(deps)) {
            path.add(deps.toString());
        }
        path.add(model.getArchive().getModelDir().toString());
        path.add(env.modelServerHome);
        String existing = System.getenv("PYTHONPATH");
        if (existing != null && !existing.isEmpty()) {
            path.add(existing);
        }
        e.put("PYTHONPATH", String.join(File.pathSeparator, path));
        e.put("TS_DECODE_INPUT_REQUEST", String.valueOf(env.decodeInputRequest));
        e.put("TS_SEND_ERROR_DETAIL", String.valueOf(env.sendErrorDetail));
        e.put("PYTHONUNBUFFERED", "1");
        e.put("TS_ZYGOTE_FALLBACK_PYTHON", python);   // the launcher's cold start, if it has to
        String tag = ProcessHandle.current().pid() + "-" + workerName + "-" + System.nanoTime();
        // inherited by every process of the worker (ranks torchrun restarts, a handler's children):
        // found again when stopping, also once re-parented
        e.put(TAG_VAR, tag);
        if (torchrun) {
            e.putAll(dist.environment(devices));
        } else if (devices != null) {
            e.put("CUDA_VISIBLE_DEVICES", devices.cudaVisibleDevices());   // custom: one process, its devices
        }
        LOG.info(workerName + ": launching " + String.join(" ", cmd)
                + (devices == null ? "" : " with CUDA_VISIBLE_DEVICES=" + devices.cudaVisibleDevices()));
        WorkerProcess wp = new WorkerProcess(pb.start(), workerName, model.name, torchrun ? tag : null, tag);
        wp.rankOffset = torchrun ? dist.firstRankOfNode() : 0;
        wp.process.getOutputStream().close();
        wp.pump(wp.process.getInputStream(), "stdout", false);
        wp.pump(wp.process.getErrorStream(), "stderr", true);
        return wp;
    }

    /** Longest line kept for error messages (the model log gets up to {@link BoundedLines#MAX_LINE_BYTES}). */
    private static final int TAIL_LINE_CHARS = 2000;

    /**
     * Copies a stream of the process into the model log, line by line, in bounded memory: lines
     * longer than {@link BoundedLines#MAX_LINE_BYTES} are cut (and say so), so a handler writing
     * without line breaks cannot grow the frontend's heap.
     */
    private void pump(InputStream in, String stream, boolean keepTail) {
        Thread t = new Thread(() -> {
            ThreadContext.put(Logging.MODEL, modelName);   // this thread only ever logs this worker's lines
            ThreadContext.put(Logging.WORKER, prefix);
            try (InputStream s = in) {
                BoundedLines.read(s, BoundedLines.MAX_LINE_BYTES, l -> line(l, keepTail));
            } catch (IOException ignored) {
                // the process closed its stream
            }
        }, prefix + "-" + stream);
        t.setDaemon(true);
        t.start();
        pumps.add(t);
    }

    private void line(String raw, boolean keepTail) {
        String line = raw;
        if (tag != null) {
            java.util.regex.Matcher m = TEE.matcher(line);
            // a rank's line (named by its global rank), or the elastic agent's own (LOGLEVEL=INFO)
            if (m.matches()) {
                line = prefix + " rank " + (rankOffset + Integer.parseInt(m.group(1))) + ": " + m.group(2);
                if (keepTail) {
                    keep(rankTail, line.substring(prefix.length() + 1));
                }
            } else {
                line = prefix + " torchrun: " + line;
            }
        }
        MODEL_LOG.info(line);
        if (line.contains("Torch worker started.")) {
            started = true;
        }
        // stderr, and stdout lines that say why (a Python traceback's last line, an [ERROR] log line)
        if (keepTail || line.contains("Error") || line.contains("error") || line.contains("ERROR")) {
            keep(stderrTail, line);
        }
    }

    private static void keep(Deque<String> tail, String line) {
        String kept = line.length() > TAIL_LINE_CHARS ? line.substring(0, TAIL_LINE_CHARS) + "..." : line;
        synchronized (tail) {
            tail.addLast(kept);
            if (tail.size() > TAIL) {
                tail.removeFirst();
            }
        }
    }

    /** The global rank of local rank 0, once a rank said it (an etcd rendezvous orders nodes itself). */
    void setRankOffset(int offset) {
        rankOffset = offset;
    }

    /** Waits until the log pumps have copied everything the process wrote (bounded). */
    void drainLogs(long millis) {
        long deadline = System.currentTimeMillis() + millis;
        for (Thread t : pumps) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                return;
            }
            try {
                t.join(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    boolean printedStarted() {
        return started;
    }

    /** The worker's own pid (a warm start's forked process) once its LOADED named it, else the launched one's. */
    long pid() {
        long w = workerPid;
        return w > 0 ? w : process.pid();
    }

    /** The pid the worker reported in LOADED: with a warm start it is not the launched process's. */
    void noteWorkerPid(long pid) {
        workerPid = pid;
    }

    boolean isAlive() {
        return process.isAlive();
    }

    /** Exit status, or null while running. */
    Integer exitStatus() {
        return process.isAlive() ? null : process.exitValue();
    }

    /**
     * The last stderr lines (joined with " | "), for error messages. For a torchrun job whose ranks
     * wrote to stderr, their last lines (named by rank): torchrun's own closing summary says only
     * which rank exited, not why.
     */
    String lastErrorLines(int n) {
        Deque<String> tail = stderrTail;
        synchronized (rankTail) {
            if (!rankTail.isEmpty()) {
                tail = rankTail;
            }
        }
        synchronized (tail) {
            List<String> l = new ArrayList<>(tail);
            return String.join(" | ", l.subList(Math.max(0, l.size() - n), l.size()));
        }
    }

    /**
     * Waits for exit up to {@code millis}, then ends what is left of the worker's process tree:
     * SIGTERM, {@link #TREE_GRACE_MS} to exit, SIGKILL (a handler's child that ignores SIGTERM
     * does not outlive its worker).
     */
    void stop(long millis) {
        try {
            process.waitFor(millis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        endTree(TREE_GRACE_MS);
    }

    /** SIGKILLs the worker's whole process tree at once. */
    public void kill() {
        endTree(0);
    }

    /**
     * Ends every process of the worker: for a torchrun job the agent first (so it restarts no
     * rank); then the launched process and its descendants, the worker's process group (the
     * worker starts its own session, ts/model_service_worker.py) and every process carrying the
     * worker's tag (re-parented children, ranks started while we looked); then DeepSpeed's shm files.
     */
    private void endTree(long graceMillis) {
        if (tag != null && process.isAlive()) {
            process.destroyForcibly();
            try {
                process.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        ProcessTree.end(this::treeMembers, graceMillis, prefix);
        removeShmBuffers();
    }

    /** The live processes of this worker (see {@link #endTree}). */
    private java.util.Collection<ProcessHandle> treeMembers() {
        java.util.Map<Long, ProcessHandle> all = new java.util.LinkedHashMap<>();
        ProcessHandle launched = process.toHandle();
        if (launched.isAlive()) {
            all.put(launched.pid(), launched);
        }
        launched.descendants().forEach(h -> all.put(h.pid(), h));
        long w = workerPid;
        if (w > 0) {
            ProcessHandle.of(w).ifPresent(h -> {
                if (h.isAlive()) {
                    all.put(h.pid(), h);
                    h.descendants().forEach(d -> all.put(d.pid(), d));
                }
            });
        }
        for (long leader : new long[] {process.pid(), w}) {
            ProcessTree.group(leader).forEach(h -> all.put(h.pid(), h));
        }
        ProcessTree.tagged(TAG_VAR, treeTag).forEach(h -> all.put(h.pid(), h));
        all.values().removeIf(h -> !ProcessTree.running(h));
        return all.values();
    }

    /** Remembers a rank's rendezvous store, which names its DeepSpeed shm buffer. */
    void noteRankEnvironment(Map<String, String> rankEnv) {
        String addr = rankEnv.get("MASTER_ADDR");
        String port = rankEnv.get("MASTER_PORT");
        if (addr != null && port != null) {
            shmPrefixes.add(ProcessTree.deepspeedShmPrefix(addr, port));
        }
    }

    /** Removes {@code /dev/shm/deepspeed_allreduce_buffer_*} files of this job's (dead) ranks. */
    void removeShmBuffers() {
        int n = ProcessTree.removeShmFiles(shmPrefixes);
        if (n > 0) {
            LOG.info(prefix + ": removed " + n + " DeepSpeed shm buffer(s) of its ranks");
        }
    }

    /** Resident memory of the process in bytes (from /proc), 0 if unknown. */
    long memoryUsage() {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/" + pid() + "/status"))) {
                if (l.startsWith("VmRSS:")) {
                    String[] f = l.trim().split("\\s+");
                    return Long.parseLong(f[1]) * 1024L;
                }
            }
        } catch (IOException | RuntimeException e) {
            return 0;
        }
        return 0;
    }
}
