package org.tserve.http;

import org.tserve.config.ConfigManager;

/**
 * Bounds on decoding a form body ({@code application/x-www-form-urlencoded} and
 * {@code multipart/form-data}): fields, a field name's length, and the decoded names and values
 * in all. Without them one 6 MB body of 3 M empty fields cost ~375 MB of heap to decode.
 */
final class FormLimits {
    final int maxFields;
    final int maxKeyLength;
    final long maxDecodedSize;

    FormLimits(int maxFields, int maxKeyLength, long maxDecodedSize) {
        this.maxFields = maxFields;
        this.maxKeyLength = maxKeyLength;
        this.maxDecodedSize = maxDecodedSize;
    }

    static FormLimits from(ConfigManager cfg) {
        return new FormLimits(cfg.getInt("max_form_fields"), cfg.getInt("max_form_key_length"),
                cfg.getLong("max_form_decoded_size"));
    }

    HttpError tooManyFields(String kind, long fields) {
        return new HttpError(413, kind + " body has " + (fields > maxFields ? "at least " + fields : "more than "
                + maxFields) + " fields, more than max_form_fields (" + maxFields + "); send fewer fields (a large "
                + "input as one field or as the raw body), or raise max_form_fields");
    }

    HttpError keyTooLong(int length) {
        return new HttpError(400, "application/x-www-form-urlencoded body has a field name of " + length
                + " characters, longer than max_form_key_length (" + maxKeyLength + "); send shorter names, or "
                + "raise max_form_key_length");
    }

    HttpError tooLarge(long size) {
        return new HttpError(413, "application/x-www-form-urlencoded body decodes to more than "
                + "max_form_decoded_size (" + maxDecodedSize + " bytes; " + size + " so far); send less, or raise "
                + "max_form_decoded_size");
    }
}
