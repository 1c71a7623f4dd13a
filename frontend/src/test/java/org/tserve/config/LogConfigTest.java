package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.List;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class LogConfigTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private File write(String xml) throws IOException {
        File f = tmp.newFile();
        Files.write(f.toPath(), xml.getBytes(StandardCharsets.UTF_8));
        return f;
    }

    private String error(String xml) throws IOException {
        File f = write(xml);
        try {
            LogConfig.parse(f);
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains(f.toString()));
            assertTrue(e.getMessage(), !e.getMessage().contains("\n"));
            return e.getMessage();
        }
        fail("no error for " + xml);
        return null;
    }

    /** TorchServe 0.12's own log4j2.xml, shortened: every stream at info. */
    private static final String TORCHSERVE_DEFAULT = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        + "<Configuration>\n  <Appenders>\n    <Console name=\"STDOUT\" target=\"SYSTEM_OUT\">\n"
        + "      <PatternLayout pattern=\"%d{ISO8601} [%-5p] %t %c - %m%n\"/>\n    </Console>\n  </Appenders>\n"
        + "  <Loggers>\n"
        + "    <Logger name=\"ACCESS_LOG\" level=\"info\"><AppenderRef ref=\"access_log\"/></Logger>\n"
        + "    <Logger name=\"io.netty\" level=\"error\"/>\n"
        + "    <Logger name=\"MODEL_LOG\" level=\"info\"/>\n"
        + "    <Logger name=\"MODEL_METRICS\" level=\"info\"/>\n"
        + "    <Logger name=\"org.pytorch.serve\" level=\"info\"/>\n"
        + "    <Logger name=\"TS_METRICS\" level=\"info\"/>\n"
        + "    <Root level=\"info\"><AppenderRef ref=\"STDOUT\"/></Root>\n"
        + "  </Loggers>\n</Configuration>\n";

    @Test
    public void torchServesDefaultFile() throws IOException {
        LogConfig c = LogConfig.parse(write(TORCHSERVE_DEFAULT));
        assertEquals("INFO", c.effectiveLevel("ACCESS_LOG"));
        assertEquals("ERROR", c.effectiveLevel("io.netty"));
        assertEquals("INFO", c.effectiveLevel("org.pytorch.serve"));
        assertEquals("INFO", c.effectiveLevel(""));
    }

    @Test
    public void inheritanceAndCaseAndAsyncLoggers() throws IOException {
        LogConfig c = LogConfig.parse(write("<configuration><Loggers>"
            + "<AsyncLogger name=\"ACCESS_LOG\" level=\"OFF\"/><Logger name=\"org.pytorch\" level=\"Warn\"/>"
            + "<Logger name=\"MODEL_LOG\"/><AsyncRoot level=\"debug\"/></Loggers></configuration>"));
        assertEquals("OFF", c.effectiveLevel("ACCESS_LOG"));
        assertEquals("WARN", c.effectiveLevel("org.pytorch.serve"));
        assertEquals("DEBUG", c.effectiveLevel("MODEL_LOG"));   // no level: inherits Root
        assertEquals("DEBUG", c.effectiveLevel("TS_METRICS"));
    }

    @Test
    public void noRootMeansErrorAsInLog4j2() throws IOException {
        LogConfig c = LogConfig.parse(write("<Configuration><Loggers><Logger name=\"ACCESS_LOG\" level=\"info\"/>"
            + "</Loggers></Configuration>"));
        assertEquals("INFO", c.effectiveLevel("ACCESS_LOG"));
        assertEquals("ERROR", c.effectiveLevel("TS_METRICS"));
    }

    @Test
    public void propertySubstitutionsAreLeftAlone() throws IOException {
        LogConfig c = LogConfig.parse(write("<Configuration><Loggers><Logger name=\"TS_METRICS\" level=\"${sys:lvl}\"/>"
            + "<Root level=\"warn\"/></Loggers></Configuration>"));
        assertEquals(List.of("TS_METRICS=${sys:lvl}"), c.skipped());
        assertEquals("WARN", c.effectiveLevel("TS_METRICS"));
    }

    @Test
    public void laterFilesWin() throws IOException {
        LogConfig a = LogConfig.parse(write(TORCHSERVE_DEFAULT));
        LogConfig b = LogConfig.parse(write("<Configuration><Loggers><Logger name=\"ACCESS_LOG\" level=\"warn\"/>"
            + "</Loggers></Configuration>"));
        LogConfig m = LogConfig.merge(List.of(a, b));
        assertEquals("WARN", m.effectiveLevel("ACCESS_LOG"));
        assertEquals("INFO", m.effectiveLevel("TS_METRICS"));
    }

    @Test
    public void locationsAcceptPathsAndFileUris() {
        assertEquals(List.of(new File("/a/b.xml"), new File("/c d/e.xml")),
            LogConfig.locations("file:///a/b.xml, /c d/e.xml"));
    }

    @Test
    public void badFilesNameTheFileAndTheProblem() throws IOException {
        assertTrue(error("<Configuration><Loggers></Configuration>").contains("is not valid XML: line 1"));
        assertTrue(error("").contains("is not valid XML"));
        assertTrue(error("status = warn\nrootLogger.level = info\n").contains("log4j2 XML files only"));
        assertTrue(error("<log4j:configuration/>").contains("has root element <log4j:configuration>"));
        assertTrue(error("<Configuration><Loggers><Logger name=\"ACCESS_LOG\" level=\"loud\"/></Loggers></Configuration>")
            .contains("logger ACCESS_LOG has level \"loud\"; use one of OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL"));
        assertTrue(error("<Configuration><Loggers><Logger level=\"info\"/></Loggers></Configuration>")
            .contains("without a name attribute"));
        try {
            LogConfig.parse(new File(tmp.getRoot(), "missing.xml"));
            fail();
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("missing.xml (--log-config / -Dlog4j.configurationFile) does not exist"));
        }
    }

    @Test
    public void externalEntitiesAreNotRead() throws IOException {
        File secret = tmp.newFile("secret.txt");
        Files.write(secret.toPath(), "OFF".getBytes(StandardCharsets.UTF_8));
        String xml = "<?xml version=\"1.0\"?><!DOCTYPE c [<!ENTITY x SYSTEM \"" + secret.toURI() + "\">]>"
            + "<Configuration><Loggers><Root level=\"&x;\"/></Loggers></Configuration>";
        try {
            LogConfig c = LogConfig.parse(write(xml));
            assertEquals("ERROR", c.effectiveLevel(""));   // the entity was not expanded into a level
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("XML"));
        }
    }
}
