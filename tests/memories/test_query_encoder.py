"""The query encoder (memories.embeddings.query_encoder_name): search questions embedded by
the int8 ONNX copy of the bundled model, close enough to the model's own vectors to search
what the model stored."""

import numpy as np
import pytest

from memories import embeddings
from memories.embeddings import embed_query, embed_texts, get_model, query_encoder_name

QUESTIONS = [
    "where does Bruno swim?",
    "What did Caroline research after the support group meeting?",
    "Wann hat Melanie das Bild gemalt?",  # not English: the model's vocabulary still holds
    "",
    "deploy " * 400,  # past the model's 256 tokens: both truncate
    "naïve café — 東京 🙂",
]


@pytest.fixture(scope="module")
def model():
    return get_model()


def test_the_bundled_model_encodes_questions_with_int8_by_default(settings):
    assert settings.SYNAPSE["QUERY_ENCODER"] == ""
    assert query_encoder_name() == "int8"


def test_int8_question_vectors_point_where_the_model_s_do(model):
    int8 = np.array([embed_query(text) for text in QUESTIONS])
    exact = np.array(embed_texts(QUESTIONS))
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    cosines = (int8 * exact).sum(axis=1)
    # Text of any length: 0.998 or more (the lowest of 600 LoCoMo questions and turns was
    # 0.9988); an empty one, two tokens, still 0.996.
    assert min(cosine for text, cosine in zip(QUESTIONS, cosines, strict=True) if text) > 0.998
    assert cosines.min() > 0.995, cosines
    # Each question is nearest its own model vector, far from the others'.
    assert list((int8 @ exact.T).argmax(axis=1)) == list(range(len(QUESTIONS)))


def test_a_batch_of_questions_gets_what_each_gets_alone(model):
    encoder = embeddings.get_query_encoder()
    together = encoder.encode(QUESTIONS)
    alone = np.vstack([encoder.encode([text]) for text in QUESTIONS])
    assert np.allclose(together, alone, atol=1e-5)


def test_the_model_setting_encodes_questions_with_the_model(model, settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "QUERY_ENCODER": "model"}
    assert query_encoder_name() == "model"
    assert embed_query(QUESTIONS[1]) == embed_texts([QUESTIONS[1]])[0]


@pytest.mark.parametrize("setting, model_setting, message", [
    ("fp16", "all-MiniLM-L6-v2", "none of"),
    ("int8", "/models/another", "copy of"),
])
def test_a_query_encoder_that_cannot_work_is_refused_by_name(settings, setting,
                                                             model_setting, message):
    settings.SYNAPSE = {**settings.SYNAPSE, "QUERY_ENCODER": setting,
                        "EMBEDDING_MODEL": model_setting}
    with pytest.raises(RuntimeError, match=message):
        embed_query("anything")


def test_another_model_encodes_its_own_questions_by_default(settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": "/models/another"}
    assert query_encoder_name() == "model"
