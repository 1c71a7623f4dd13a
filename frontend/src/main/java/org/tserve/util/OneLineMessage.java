package org.tserve.util;

import org.apache.logging.log4j.message.AbstractMessageFactory;
import org.apache.logging.log4j.message.AsynchronouslyFormattable;
import org.apache.logging.log4j.message.Message;
import org.apache.logging.log4j.message.ParameterizedMessage;
import org.apache.logging.log4j.util.StringBuilderFormattable;

/**
 * A log message kept on one line whatever layout prints it: CR/LF become spaces and other control
 * characters are escaped ({@link LogText#appendOneLine}), so a client-chosen string inside it
 * cannot forge a line. The escaping runs only for events that are written, in the appender's
 * thread when it is asynchronous (the text is immutable, so it may be formatted later).
 */
@AsynchronouslyFormattable
public final class OneLineMessage implements Message, StringBuilderFormattable {
    private static final long serialVersionUID = 1L;
    private static final Object[] NO_PARAMETERS = {};

    /** The factory of tserve's loggers ({@link Logging#named}). */
    public static final Factory FACTORY = new Factory();

    /**
     * Makes {@link OneLineMessage}s; also every library logger's (Netty, gRPC through
     * java.util.logging), as the {@code log4j2.messageFactory} that {@link LogSetup#prepare} sets.
     */
    public static final class Factory extends AbstractMessageFactory {
        private static final long serialVersionUID = 1L;

        @Override
        public Message newMessage(String message) {
            return new OneLineMessage(message);
        }

        @Override
        public Message newMessage(CharSequence message) {
            return new OneLineMessage(String.valueOf(message));
        }

        @Override
        public Message newMessage(String message, Object... params) {
            return new OneLineMessage(ParameterizedMessage.format(message, params));
        }
    }

    private final String text;

    public OneLineMessage(String text) {
        this.text = text;
    }

    @Override
    public String getFormattedMessage() {
        return LogText.oneLine(text);
    }

    @Override
    public void formatTo(StringBuilder buffer) {
        LogText.appendOneLine(buffer, text);
    }

    @Override
    @SuppressWarnings("deprecation")   // still part of log4j's Message interface; layouts may call it
    public String getFormat() {
        return text;
    }

    @Override
    public Object[] getParameters() {
        return NO_PARAMETERS;
    }

    @Override
    public Throwable getThrowable() {
        return null;
    }

    @Override
    public String toString() {
        return getFormattedMessage();
    }
}
