package org.tserve;

import org.tserve.auth.TokenAuthorization;
import org.tserve.config.ConfigManager;
import org.tserve.wlm.ModelManager;

/** What a {@link ServerExtension} gets: configuration, the model manager and token checks. */
public final class ServerContext {
    private final ConfigManager config;
    private final ModelManager modelManager;
    private final TokenAuthorization tokens;

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
}
