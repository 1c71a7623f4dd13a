package org.tserve.server;

import org.tserve.auth.TokenAuthorization;
import org.tserve.config.ConfigManager;
import org.tserve.wlm.ModelManager;

/** What a {@link ServerExtension} and the REST server get: configuration, the model manager, token checks and response listeners. */
public final class ServerContext {
    private final ConfigManager config;
    private final ModelManager modelManager;
    private final TokenAuthorization tokens;
    private final ResponseListeners responses = new ResponseListeners();

    public ServerContext(ConfigManager config, ModelManager modelManager, TokenAuthorization tokens) {
        this.config = config;
        this.modelManager = modelManager;
        this.tokens = tokens;
    }

    public ConfigManager config() {
        return config;
    }

    public ModelManager modelManager() {
        return modelManager;
    }

    /** Token authorization; {@code tokens().isEnabled()} is false with -dt / disable_token_authorization. */
    public TokenAuthorization tokens() {
        return tokens;
    }

    /** Listeners of every answer the front ends send (metrics counts them). */
    public ResponseListeners responses() {
        return responses;
    }
}
