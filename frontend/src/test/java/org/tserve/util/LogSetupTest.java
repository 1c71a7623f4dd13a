package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.apache.logging.log4j.LogManager;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class LogSetupTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    @After
    public void backToTheDefault() {
        System.clearProperty(LogSetup.CONFIG_PROPERTY);
        LogManager.shutdown();
    }

    @Test
    public void logFormatPicksTheBundledConfig() {
        assertEquals(LogSetup.TEXT_CONFIG, LogSetup.bundled(null));
        assertEquals(LogSetup.TEXT_CONFIG, LogSetup.bundled(" Text "));
        assertEquals(LogSetup.JSON_CONFIG, LogSetup.bundled("json"));
        try {
            LogSetup.bundled("xml");
            fail("xml accepted");
        } catch (LogConfigException e) {
            assertEquals("log_format=xml is not a log format; use text or json (or give your own log4j2 file with --log-config)",
                    e.getMessage());
        }
    }

    @Test
    public void theBundledConfigsAreInTheJar() {
        for (String r : new String[] {LogSetup.TEXT_CONFIG, LogSetup.JSON_CONFIG}) {
            assertTrue(r, LogSetup.class.getClassLoader().getResource(r) != null);
        }
    }

    @Test
    public void aFileLog4j2CannotUseIsOneErrorNamingItAndTheProblem() throws Exception {
        String[][] cases = {
            {"<Configuration><Loggers><Root level=\"info\"></Loggers></Configuration>", "not valid XML: line 1, column"},
            {"<Configuration><Loggers><Logger name=\"ACCESS_LOG\" level=\"quiet\"/></Loggers></Configuration>",
                "Unknown level constant [QUIET]"},
        };
        for (String[] c : cases) {
            File f = tmp.newFile();
            Files.write(f.toPath(), c[0].getBytes(StandardCharsets.UTF_8));
            System.setProperty(LogSetup.CONFIG_PROPERTY, f.getPath());
            try {
                LogSetup.start("text");
                fail("accepted " + c[0]);
            } catch (LogConfigException e) {
                String m = e.getMessage();
                assertTrue(m, m.startsWith("Log config " + f.getPath() + " (--log-config / -Dlog4j.configurationFile) cannot be used: "));
                assertTrue(m, m.contains(c[1]));
            }
        }
    }
}
