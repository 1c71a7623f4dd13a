package org.tserve.util;

import java.util.ArrayList;
import java.util.List;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.config.Property;
import org.apache.logging.log4j.core.layout.PatternLayout;
import org.junit.rules.ExternalResource;

/**
 * A JUnit rule that collects one logger's events during a test, each formatted by {@code pattern}
 * (a log4j2 PatternLayout, without the line end): an appender added to log4j2's running config.
 */
public final class LogCapture extends ExternalResource {
    private final String loggerName;
    private final PatternLayout layout;
    private final List<String> lines = new ArrayList<>();
    private AbstractAppender appender;

    public LogCapture(String loggerName, String pattern) {
        this.loggerName = loggerName;
        this.layout = PatternLayout.newBuilder().setPattern(pattern).setAlwaysWriteExceptions(false).build();
    }

    /** The lines so far. */
    public synchronized List<String> lines() {
        return new ArrayList<>(lines);
    }

    @Override
    protected void before() {
        appender = new AbstractAppender("capture-" + loggerName, null, layout, true, Property.EMPTY_ARRAY) {
            @Override
            public void append(LogEvent event) {
                synchronized (LogCapture.this) {
                    lines.add(layout.toSerializable(event));
                }
            }
        };
        appender.start();
        LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
        Configuration c = ctx.getConfiguration();
        c.addAppender(appender);
        LoggerConfig lc = new LoggerConfig(loggerName, Level.INFO, false);
        lc.addAppender(appender, null, null);
        c.addLogger(loggerName, lc);
        ctx.updateLoggers();
    }

    @Override
    protected void after() {
        LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
        ctx.getConfiguration().removeLogger(loggerName);
        ctx.updateLoggers();
        appender.stop();
    }
}
