package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.config.LogConfig;

public class LoggingLevelsTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private static final String[] NAMES = {"", Logging.SERVER, Logging.ACCESS_LOG, Logging.TS_METRICS,
        Logging.MODEL_METRICS, Logging.MODEL_LOG, "io.netty", "io.grpc"};
    private final Level[] saved = new Level[NAMES.length];

    {
        for (int i = 0; i < NAMES.length; i++) {
            saved[i] = Logger.getLogger(NAMES[i]).getLevel();
        }
    }

    @After
    public void restore() {
        for (int i = 0; i < NAMES.length; i++) {
            Logger.getLogger(NAMES[i]).setLevel(saved[i]);
        }
    }

    private LogConfig config(String loggers) throws IOException {
        File f = tmp.newFile();
        Files.write(f.toPath(), ("<Configuration><Loggers>" + loggers + "</Loggers></Configuration>")
            .getBytes(StandardCharsets.UTF_8));
        return LogConfig.parse(f);
    }

    @Test
    public void quietConfigTurnsOffAccessAndMetricLinesButNotTheServerLog() throws IOException {
        String line = Logging.applyLevels(config("<Logger name=\"ACCESS_LOG\" level=\"warn\"/>"
            + "<Logger name=\"TS_METRICS\" level=\"off\"/><Logger name=\"MODEL_METRICS\" level=\"error\"/>"
            + "<Logger name=\"org.pytorch.serve\" level=\"info\"/><Root level=\"warn\"/>"));
        assertEquals("Root=WARN, org.pytorch.serve=INFO, ACCESS_LOG=WARN, TS_METRICS=OFF, MODEL_METRICS=ERROR,"
            + " MODEL_LOG=WARN", line);
        assertFalse(Logging.enabled(Logging.ACCESS_LOG));
        assertFalse(Logging.enabled(Logging.TS_METRICS));
        assertFalse(Logging.enabled(Logging.MODEL_METRICS));
        assertFalse(Logging.enabled(Logging.MODEL_LOG));
        assertTrue(Logging.enabled(Logging.SERVER));
        assertTrue(Logging.enabled("org.tserve.wlm.WorkerThread"));
        assertEquals(Level.WARNING, Logger.getLogger("io.netty").getLevel());
        assertEquals(null, Logging.access());
    }

    @Test
    public void levelsMapOntoJul() throws IOException {
        Logging.applyLevels(config("<Logger name=\"MODEL_LOG\" level=\"debug\"/><Root level=\"fatal\"/>"));
        assertTrue(Logger.getLogger(Logging.MODEL_LOG).isLoggable(Level.FINE));
        assertFalse(Logger.getLogger(Logging.SERVER).isLoggable(Level.SEVERE));   // FATAL: not even errors
        assertFalse(Logger.getLogger("io.grpc").isLoggable(Level.SEVERE));
        assertEquals(Level.OFF, Logging.julLevel("OFF"));
        assertEquals(Level.FINEST, Logging.julLevel("TRACE"));
        assertEquals(Level.ALL, Logging.julLevel("ALL"));
    }
}
