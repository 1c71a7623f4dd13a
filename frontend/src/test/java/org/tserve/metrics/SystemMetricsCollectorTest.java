package org.tserve.metrics;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.util.List;
import org.junit.Test;

public class SystemMetricsCollectorTest {
    @Test
    public void cpuLineIsIdlePlusIowaitAgainstTotal() {
        long[] a = SystemMetricsCollector.parseCpu("cpu  100 0 100 700 100 0 0 0 0 0");
        assertArrayEquals(new long[] {800, 1000}, a);
        long[] b = SystemMetricsCollector.parseCpu("cpu  200 0 200 1200 200 0 0 0 0 0");
        assertEquals(25.0, SystemMetricsCollector.cpuPercent(a, b), 1e-9);   // 200 busy of 800
        assertNull(SystemMetricsCollector.parseCpu("intr 1 2 3"));
    }

    @Test
    public void meminfoTotalAndAvailable() {
        double[] m = SystemMetricsCollector.parseMeminfo(List.of("MemTotal:       2048 kB", "MemFree: 10 kB",
            "MemAvailable:   1024 kB"));
        assertArrayEquals(new double[] {2048 * 1024.0, 1024 * 1024.0}, m, 0);
        assertNull(SystemMetricsCollector.parseMeminfo(List.of("MemTotal: 1 kB")));
    }

    @Test
    public void nvidiaSmiCsv() {
        List<double[]> g = SystemMetricsCollector.parseNvidiaSmi(List.of("0, 1024, 4096, 37", "garbage", "1, 0, 8192, 0"));
        assertEquals(2, g.size());
        assertArrayEquals(new double[] {0, 1024, 4096, 37}, g.get(0), 0);
    }

    @Test
    public void pathLookup() {
        assertTrue(SystemMetricsCollector.onPath("sh"));
        assertTrue(!SystemMetricsCollector.onPath("no-such-tool-for-tserve"));
    }

    @Test
    public void collectRecordsHostMetricsFromProc() {
        MetricsConfig c = MetricsConfig.parse("ts_metrics:\n  gauge:\n"
            + "    - {name: MemoryUsed, unit: Megabytes, dimensions: [Level, Hostname]}\n"
            + "    - {name: DiskUtilization, unit: Percent, dimensions: [Level, Hostname]}\n"
            + "    - {name: CPUUtilization, unit: Percent, dimensions: [Level, Hostname]}\n", "t");
        MetricsRegistry r = new MetricsRegistry(c, MetricsMode.PROMETHEUS, "h", false, false);
        SystemMetricsCollector s = new SystemMetricsCollector(r, 60, 0);
        s.collect();
        String t = r.scrape(null);
        assertTrue(t, t.contains("MemoryUsed{Level=\"Host\",Hostname=\"h\",} "));
        assertTrue(t, t.contains("DiskUtilization{Level=\"Host\",Hostname=\"h\",} "));
        assertTrue(t, t.contains("CPUUtilization{Level=\"Host\",Hostname=\"h\",} "));
    }
}
