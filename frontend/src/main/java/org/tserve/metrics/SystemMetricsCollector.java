package org.tserve.metrics;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * Host metrics at startup and then every {@code metric_time_interval} seconds, read in Java: CPU from /proc/stat,
 * memory from /proc/meminfo, disk from the root file system, GPU memory and utilisation from
 * {@code nvidia-smi} when GPUs are configured ({@code number_of_gpu}) or, if that is unset, when
 * nvidia-smi is on the PATH. Values use TorchServe's names and units.
 */
public final class SystemMetricsCollector {
    private static final Logger LOG = Logging.logger(SystemMetricsCollector.class);
    private static final double MB = 1024.0 * 1024.0;
    private static final double GB = MB * 1024.0;

    private final MetricsRegistry registry;
    private final int intervalSeconds;
    private final int gpus;
    private ScheduledExecutorService timer;
    private long[] lastCpu;
    private boolean gpuWarned;

    /** @param gpus {@code number_of_gpu}; negative = not configured: GPU metrics when nvidia-smi is on the PATH */
    public SystemMetricsCollector(MetricsRegistry registry, int intervalSeconds, int gpus) {
        this.registry = registry;
        this.intervalSeconds = intervalSeconds;
        this.gpus = gpus >= 0 ? gpus : (onPath("nvidia-smi") ? 1 : 0);
    }

    static boolean onPath(String exe) {
        String path = System.getenv("PATH");
        if (path == null) {
            return false;
        }
        for (String dir : path.split(File.pathSeparator)) {
            File f = new File(dir, exe);
            if (!dir.isEmpty() && f.isFile() && f.canExecute()) {
                return true;
            }
        }
        return false;
    }

    public synchronized void start() {
        if (timer != null) {
            return;
        }
        timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "system-metrics");
            t.setDaemon(true);
            return t;
        });
        // a sample at once, then every interval (TorchServe's scheduleAtFixedRate(collector, 0, interval)):
        // the first CPU value is the busy share since boot, the next ones since the previous sample
        lastCpu = null;
        timer.scheduleAtFixedRate(this::collectSafely, 0, intervalSeconds, TimeUnit.SECONDS);
    }

    public synchronized void stop() {
        if (timer != null) {
            timer.shutdownNow();
            timer = null;
        }
    }

    private void collectSafely() {
        try {
            collect();
        } catch (RuntimeException e) {
            LOG.warn("System metrics collection failed: " + e);
        }
    }

    /** Reads every system metric once and records it. */
    public void collect() {
        long[] cpu = readCpu();
        if (cpu != null) {
            long[] prev = lastCpu;
            double pct = cpuPercent(prev, cpu);
            lastCpu = cpu;
            if (!Double.isNaN(pct)) {
                registry.systemMetric("CPUUtilization", round(pct), null);
            }
        }
        double[] mem = readMemory();
        if (mem != null) {
            double total = mem[0];
            double avail = mem[1];
            registry.systemMetric("MemoryUsed", round((total - avail) / MB), null);
            registry.systemMetric("MemoryAvailable", round(avail / MB), null);
            registry.systemMetric("MemoryUtilization", total > 0 ? round(100.0 * (total - avail) / total) : 0, null);
        }
        File root = new File("/");
        long total = root.getTotalSpace();
        long free = root.getUsableSpace();
        if (total > 0) {
            long used = total - root.getFreeSpace();
            registry.systemMetric("DiskUsage", round(used / GB), null);
            registry.systemMetric("DiskAvailable", round(free / GB), null);
            registry.systemMetric("DiskUtilization", round(100.0 * used / (used + free)), null);
        }
        if (gpus > 0) {
            collectGpu();
        }
    }

    /** CPU busy percent between two /proc/stat readings (since boot when {@code prev} is null). */
    static double cpuPercent(long[] prev, long[] now) {
        long idle = now[0] - (prev == null ? 0 : prev[0]);
        long all = now[1] - (prev == null ? 0 : prev[1]);
        return all <= 0 ? Double.NaN : 100.0 * (all - idle) / all;
    }

    /** {idle+iowait, total} jiffies from the first line of /proc/stat, or null. */
    static long[] readCpu() {
        try {
            List<String> lines = Files.readAllLines(Paths.get("/proc/stat"), StandardCharsets.US_ASCII);
            return parseCpu(lines.isEmpty() ? "" : lines.get(0));
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    static long[] parseCpu(String line) {
        String[] f = line.trim().split("\\s+");
        if (f.length < 5 || !f[0].equals("cpu")) {
            return null;
        }
        long total = 0;
        for (int i = 1; i < Math.min(f.length, 9); i++) {   // user..steal; guest is already in user
            total += Long.parseLong(f[i]);
        }
        long idle = Long.parseLong(f[4]) + (f.length > 5 ? Long.parseLong(f[5]) : 0);
        return new long[] {idle, total};
    }

    /** {MemTotal, MemAvailable} in bytes from /proc/meminfo, or null. */
    static double[] readMemory() {
        try {
            return parseMeminfo(Files.readAllLines(Paths.get("/proc/meminfo"), StandardCharsets.US_ASCII));
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    static double[] parseMeminfo(List<String> lines) {
        double total = -1;
        double avail = -1;
        for (String l : lines) {
            String[] f = l.trim().split("\\s+");
            if (f.length < 2) {
                continue;
            }
            if (f[0].equals("MemTotal:")) {
                total = Double.parseDouble(f[1]) * 1024;
            } else if (f[0].equals("MemAvailable:")) {
                avail = Double.parseDouble(f[1]) * 1024;
            }
        }
        return total < 0 || avail < 0 ? null : new double[] {total, avail};
    }

    private void collectGpu() {
        List<String> out = new ArrayList<>();
        try {
            Process p = new ProcessBuilder("nvidia-smi",
                "--query-gpu=index,memory.used,memory.total,utilization.gpu", "--format=csv,noheader,nounits")
                .redirectErrorStream(true).start();
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String l;
                while ((l = r.readLine()) != null) {
                    out.add(l);
                }
            }
            if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0) {
                p.destroyForcibly();
                throw new IOException("nvidia-smi failed: " + String.join(" ", out));
            }
        } catch (IOException e) {
            if (!gpuWarned) {
                gpuWarned = true;
                LOG.warn("GPU metrics unavailable (" + e.getMessage() + "); number_of_gpu is " + gpus);
            }
            return;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        for (double[] g : parseNvidiaSmi(out)) {
            String id = String.valueOf((int) g[0]);
            registry.systemMetric("GPUMemoryUsed", g[1], id);
            registry.systemMetric("GPUMemoryUtilization", g[2] > 0 ? round(100.0 * g[1] / g[2]) : 0, id);
            registry.systemMetric("GPUUtilization", g[3], id);
        }
    }

    /** Rows {index, memory.used MB, memory.total MB, utilization %} from nvidia-smi's csv. */
    static List<double[]> parseNvidiaSmi(List<String> lines) {
        List<double[]> out = new ArrayList<>();
        for (String l : lines) {
            String[] f = l.split(",");
            if (f.length < 4) {
                continue;
            }
            try {
                out.add(new double[] {Double.parseDouble(f[0].trim()), Double.parseDouble(f[1].trim()),
                    Double.parseDouble(f[2].trim()), Double.parseDouble(f[3].trim())});
            } catch (NumberFormatException e) {
                LOG.debug("nvidia-smi line not understood: " + l);
            }
        }
        return out;
    }

    private static double round(double v) {
        return Math.round(v * 10.0) / 10.0;
    }
}
