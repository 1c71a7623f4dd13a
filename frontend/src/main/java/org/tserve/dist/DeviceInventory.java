package org.tserve.dist;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/**
 * How many accelerators this server may use: {@code number_of_gpu} when configured, else what
 * {@code CUDA_VISIBLE_DEVICES} names, else what {@code nvidia-smi} lists, else none.
 */
public final class DeviceInventory {
    private DeviceInventory() {}

    /** @param configured the {@code number_of_gpu} setting, or null when it is not set. */
    public static int count(Integer configured) {
        if (configured != null) {
            return Math.max(0, configured);
        }
        String visible = System.getenv("CUDA_VISIBLE_DEVICES");
        if (visible != null) {
            return countVisible(visible);
        }
        return countWithNvidiaSmi();
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
