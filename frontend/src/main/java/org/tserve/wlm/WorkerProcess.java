package org.tserve.wlm;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;
import java.util.regex.Pattern;
import org.tserve.config.ModelSettings;
import org.tserve.util.Logging;

/**
 * One Python backend process ({@code python -m ts.model_service_worker}): launch, log copying
 * (every line into the model log, prefixed with worker and model), and killing its process tree.
 */
final class WorkerProcess {
    private static final Logger MODEL_LOG = Logger.getLogger(Logging.MODEL_LOG);
    private static final Logger LOG = Logger.getLogger(WorkerProcess.class.getName());
    private static final int TAIL = 20;

    private final Process process;
    private final String prefix;
    private final Deque<String> stderrTail = new ArrayDeque<>();
    private volatile boolean started;
    private final List<Thread> pumps = new ArrayList<>();

    private WorkerProcess(Process process, String prefix) {
        this.process = process;
        this.prefix = prefix;
    }

    /** The Unix socket path of a worker port. */
    static Path socketPath(WorkerEnvironment env, int port) {
        return env.socketDir.resolve(".ts.sock." + port);
    }

    /** A torchrun job: {@code parallelType} pp, tp or pptp with {@code parallelLevel > 0} (TorchServe's rule). */
    static boolean isTorchrun(ModelSettings s) {
        return s.parallelLevel > 0 && (s.parallelType.equals("pp") || s.parallelType.equals("tp")
                || s.parallelType.equals("pptp"));
    }

    /**
     * {@code <python> -m torch.distributed.run ... -m ts.model_service_worker}: one elastic agent
     * with {@code parallelLevel} ranks, each listening on socket {@code port + local rank}.
     */
    private static List<String> torchrunPrefix(WorkerEnvironment env, ModelSettings s, Model model, int port) {
        Map<String, Object> t = s.torchrun;
        List<String> cmd = new ArrayList<>(List.of(env.python, "-m", "torch.distributed.run"));
        String nnodes = String.valueOf(t.getOrDefault("nnodes", 1));
        cmd.addAll(List.of("--nnodes", nnodes, "--nproc-per-node", String.valueOf(s.parallelLevel)));
        Object endpoint = t.get("rdzv-endpoint");
        if (endpoint == null && nnodes.equals("1")) {
            cmd.add("--standalone");   // c10d on a free local port: jobs never share a rendezvous
        } else {
            cmd.addAll(List.of("--rdzv-backend", String.valueOf(t.getOrDefault("rdzv-backend", "c10d")),
                    "--rdzv-id", model.name + "_" + port));
            if (endpoint != null) {
                cmd.addAll(List.of("--rdzv-endpoint", String.valueOf(endpoint)));
            }
            if (t.get("node-rank") != null) {
                cmd.addAll(List.of("--node-rank", String.valueOf(t.get("node-rank"))));
            }
        }
        Path logDir = Logging.logDir().toPath().resolve("torchelastic_ts");
        cmd.addAll(List.of("--max-restarts", String.valueOf(t.getOrDefault("max-restarts", 1))));
        if (t.get("monitor-interval") != null) {
            cmd.addAll(List.of("--monitor-interval", String.valueOf(t.get("monitor-interval"))));
        }
        cmd.addAll(List.of("--log-dir", logDir.toString(), "--tee", "3", "-m", "ts.model_service_worker"));
        return cmd;
    }

    static WorkerProcess start(WorkerEnvironment env, Model model, int port, String workerName, String visibleDevices)
            throws IOException {
        ModelSettings settings = model.getSettings();
        boolean torchrun = isTorchrun(settings);
        List<String> cmd = torchrun ? torchrunPrefix(env, settings, model, port)
                : new ArrayList<>(List.of(env.python, "-m", "ts.model_service_worker"));
        if (env.useTcp) {
            cmd.addAll(List.of("--sock-type", "tcp", "--host", "127.0.0.1", "--port", String.valueOf(port)));
        } else {
            Path sock = socketPath(env, port);
            for (int r = 0; r < (torchrun ? settings.parallelLevel : 1); r++) {
                Files.deleteIfExists(socketPath(env, port + r));
            }
            cmd.addAll(List.of("--sock-type", "unix", "--sock-name", sock.toString()));
        }
        if (env.metricsConfig != null && !env.metricsConfig.isEmpty()) {
            cmd.addAll(List.of("--metrics-config", env.metricsConfig));
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
        e.put("PYTHONUNBUFFERED", "1");
        if (torchrun) {
            // a fresh rendezvous store per elastic restart attempt (see shared notes on torchrun)
            e.put("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1");
            e.put("OMP_NUM_THREADS", String.valueOf(settings.torchrun.getOrDefault("OMP_NUMBER_THREADS", 1)));
            if (!e.containsKey("HF_HUB_OFFLINE")) {
                e.put("HF_HUB_OFFLINE", "1");
            }
        }
        if (visibleDevices != null) {
            e.put("CUDA_VISIBLE_DEVICES", visibleDevices);
        }
        LOG.info(workerName + ": launching " + String.join(" ", cmd));
        WorkerProcess wp = new WorkerProcess(pb.start(), workerName);
        wp.process.getOutputStream().close();
        wp.pump(wp.process.getInputStream(), "stdout", false);
        wp.pump(wp.process.getErrorStream(), "stderr", true);
        return wp;
    }

    private void pump(InputStream in, String stream, boolean keepTail) {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    MODEL_LOG.info(line);
                    if (line.contains("Torch worker started.")) {
                        started = true;
                    }
                    if (keepTail || line.contains("Error") || line.contains("error")) {
                        synchronized (stderrTail) {
                            stderrTail.addLast(line);
                            if (stderrTail.size() > TAIL) {
                                stderrTail.removeFirst();
                            }
                        }
                    }
                }
            } catch (IOException ignored) {
                // the process closed its stream
            }
        }, prefix + "-" + stream);
        t.setDaemon(true);
        t.start();
        pumps.add(t);
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

    long pid() {
        return process.pid();
    }

    boolean isAlive() {
        return process.isAlive();
    }

    /** Exit status, or null while running. */
    Integer exitStatus() {
        return process.isAlive() ? null : process.exitValue();
    }

    /** The last stderr lines (joined with " | "), for error messages. */
    String lastErrorLines(int n) {
        synchronized (stderrTail) {
            List<String> l = new ArrayList<>(stderrTail);
            return String.join(" | ", l.subList(Math.max(0, l.size() - n), l.size()));
        }
    }

    /** Waits for exit up to {@code millis}; kills the whole tree if still alive. */
    void stop(long millis) {
        try {
            if (process.waitFor(millis, TimeUnit.MILLISECONDS)) {
                return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        kill();
    }

    /** SIGKILLs the process and all its descendants. */
    void kill() {
        List<ProcessHandle> tree = new ArrayList<>();
        process.toHandle().descendants().forEach(tree::add);
        process.destroyForcibly();
        for (ProcessHandle h : tree) {
            h.destroyForcibly();
        }
        try {
            process.waitFor(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Resident memory of the process in bytes (from /proc), 0 if unknown. */
    long memoryUsage() {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/" + process.pid() + "/status"))) {
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
