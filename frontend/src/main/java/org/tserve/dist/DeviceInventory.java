package org.tserve.dist;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/**
 * How many accelerators this server may use (TorchServe's rule): {@code number_of_gpu} when
 * configured, capped at the detected count when detection finds any GPU; else the detected
 * count. Detection: the GPUs {@code nvidia-smi} lists, limited to what
 * {@code CUDA_VISIBLE_DEVICES} names when it is set; none without nvidia-smi. A configured
 * count on a machine without GPUs is kept (tests use it to fake devices; the ranks then run
 * on CPU because CUDA is unavailable to them).
 */
public final class DeviceInventory {
    private static volatile Integer detected;

    private DeviceInventory() {}

    /** @param configured the {@code number_of_gpu} setting, or null when it is not set. */
    public static int count(Integer configured) {
        return count(configured, detect());
    }

    /** The rule alone, for a known detected count. */
    static int count(Integer configured, int detectedGpus) {
        if (configured == null) {
            return detectedGpus;
        }
        int n = Math.max(0, configured);
        return detectedGpus > 0 ? Math.min(n, detectedGpus) : n;
    }

    /** GPUs found on this machine (probed once per JVM). */
    public static int detect() {
        Integer d = detected;
        if (d == null) {
            int n = countWithNvidiaSmi();
            String visible = System.getenv("CUDA_VISIBLE_DEVICES");
            if (n > 0 && visible != null) {
                n = Math.min(n, countVisible(visible));
            }
            d = n;
            detected = d;
        }
        return d;
    }

    /** "0,1,3" → 3; "" or "-1" (CUDA's way to hide every device) → 0. */
    static int countVisible(String visible) {
        int n = 0;
        for (String id : visible.split(",")) {
            String t = id.trim();
            if (t.isEmpty() || t.startsWith("-")) {
                break;   // CUDA stops at the first invalid entry
            }
            n++;
        }
        return n;
    }

    private static int countWithNvidiaSmi() {
        try {
            Process p = new ProcessBuilder("nvidia-smi", "--query-gpu=index", "--format=csv,noheader")
                    .redirectErrorStream(true).start();
            p.getOutputStream().close();
            int n = 0;
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.trim().matches("\\d+")) {
                        n++;
                    }
                }
            }
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return 0;
            }
            return p.exitValue() == 0 ? n : 0;
        } catch (java.io.IOException e) {
            return 0;   // no nvidia-smi: a CPU-only machine
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 0;
        }
    }
}
