"""Deployment facts read from the user's own words (probe/stated_facts.py) and used where nothing
else gave them: a question alone gets the performance model's numbers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from vllm_advisor.cli.main import cli
from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.perf.catalog import get_gpu
from vllm_advisor.perf.predict import build_engine_model
from vllm_advisor.probe.stated_facts import MAX_CHARS, read_stated_facts
from vllm_advisor.schema import Deployment, EngineArgs, StatedFacts
from vllm_advisor.session import Session

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def seed_post(shared_dir) -> str:
    """The motivating user's first post, exactly as written on the forum (Chinese, no spaces)."""
    text = (shared_dir / "seed" / "forum-thread-long-input-slowdown.txt").read_text(encoding="utf-8")
    return text.split("\n2\n")[0]


def test_the_motivating_post_states_the_whole_deployment(seed_post):
    said = read_stated_facts(seed_post)  # "我使用vllm+Qwen32B+tp2+h800，输入63K（长输入），输出1K ... 并发100 ... 并发40"
    assert said.model == "Qwen32B"  # as written; the catalog resolves it (an assumed alias, with its note)
    assert get_gpu(said.gpu).name == "H800-SXM"
    assert (said.tensor_parallel_size, said.num_gpus) == (2, 2)  # tp2 and no other count: two GPUs
    assert (said.input_len, said.output_len) == (63_000, 1_000)
    assert said.concurrency == [40, 100]
    assert said.vllm_version is None  # "vllm+Qwen32B" names no release


def test_dev_case_questions(shared_dir):
    """The words of the dev cases, against what their case files give by hand."""
    questions = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8"))["question"] for p in (shared_dir / "cases" / "dev").glob("*.yaml")}
    said = read_stated_facts(questions["vllm-7604-chunked-prefill-40k-offline"])  # "... on 8xH100 (TP8) with 40K-token inputs"
    assert (said.gpu, said.num_gpus, said.tensor_parallel_size, said.input_len) == ("H100-SXM", 8, 8, 40_000)
    said = read_stated_facts(questions["club3090-356-tp2-no-p2p"])
    assert (said.gpu, said.tensor_parallel_size) == ("RTX-3090", 2)
    said = read_stated_facts(questions["sglang-922-16k-ttft-a6000"])  # "a single A6000 48GB with Llama-3.1-70B AWQ"
    assert (said.model, said.gpu, said.num_gpus) == ("Llama-3.1-70B-AWQ", "RTX-A6000", 1)


@pytest.mark.parametrize(
    "text",
    [
        "Qwen2.5-7B is fast on our H100 but Llama-3.1-70B is slow on the A100",  # two models, two GPUs: a comparison
        "code prompt: 95.23 tok/s vs 93.5 PCIe",  # a rate, not a prompt length
        "offline batch generation about 20 minutes for a single run",
        "最高输出约 80 token/s",
        "the proxy gives 30 tok/s while vLLM 51.4 tok/s direct",  # not a release
        "The workload shares a system prompt of about 240 tokens",  # a shared prefix, not the prompt
        "I ran 4090 prompts through it",  # a bare number is not an RTX 4090
        "prompts of 8000-16000 tokens while several generations stream",  # a range names no one length (dev case vllm-1026)
    ],
)
def test_what_the_words_do_not_state(text):
    said = read_stated_facts(text)
    assert (said.model, said.gpu, said.input_len, said.output_len, said.vllm_version) == (None, None, None, None, None)


@pytest.mark.parametrize(
    ("text", "lengths"),
    [("Why is TTFT 1.2 s with 5,000-token prompts at one stream?", (5000, None)), ("prompts of 12,000 tokens, output 1,000 tokens", (12000, 1000)),
     ("输入 63,000 个 token", (63000, None)), ("batch sizes 8,16,32 tokens of prompts", (None, None))],
)
def test_lengths_with_thousands_separators(text, lengths):
    """"5,000-token prompts" was read as 0 tokens (its "000"), so no length at all."""
    said = read_stated_facts(text)
    assert (said.input_len, said.output_len) == lengths


def test_names_and_counts_as_people_write_them():
    said = read_stated_facts("Qwen/Qwen2.5-32B-Instruct-AWQ, TP2 on two H800s, 63K-token prompts, 1K-token outputs, 40 and 100 clients, vllm==0.6.3")
    assert said == StatedFacts(model="Qwen2.5-32B-Instruct-AWQ", gpu="H800-SXM", num_gpus=2, tensor_parallel_size=2, vllm_version="0.6.3", quantization="awq", input_len=63_000, output_len=1_000, concurrency=[40, 100])
    assert read_stated_facts("两张 A800 跑 DeepSeek-R1-Distill-Qwen-32B，并发 64").model_dump(exclude_defaults=True) == {
        "model": "DeepSeek-R1-Distill-Qwen-32B",
        "gpu": "A800-SXM4-80GB",
        "num_gpus": 2,
        "concurrency": [64],
    }


def test_hostile_text_is_bounded():
    text = ("H800 x" * 50_000) + ("并发" + "9" * 40) * 10_000 + "\x00\u202e" * 10_000
    start = time.perf_counter()
    said = read_stated_facts(text)
    assert time.perf_counter() - start < 2.0
    assert said.concurrency == []  # no client count of 40 digits
    assert len(text) > MAX_CHARS


def test_a_question_alone_gets_the_models_numbers(seed_post):
    """No case file, no flags: the words give the model its deployment and workload."""
    inputs = gather(question=seed_post)
    assert inputs.engine is not None and inputs.engine.config.tensor_parallel_size == 2
    assert (inputs.input_len, inputs.output_len) == (63_000, 1_000)
    assert [r.offered_concurrency for r in inputs.predicted] == [40, 100]
    kv_requests = inputs.engine.memory.kv_cache_tokens / 64_000
    assert 3 < kv_requests < 8  # ~5 requests of 64K fit: the motivating case's figure
    running = inputs.predicted[-1].server_view.running_mean
    assert 3 < running < 8  # at 100 clients, the few that fit run and the rest wait


def test_ask_says_what_it_read_and_answers_with_numbers(seed_post):
    result = CliRunner().invoke(cli, ["ask", seed_post, "--json", "--no-log"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    notes = json.loads(result.output)["notes"]
    assert any(n.startswith("以下取自你的描述") and "H800-SXM" in n for n in notes), notes
    assert not any("未提供" in n for n in notes), notes
    text = CliRunner().invoke(cli, ["ask", seed_post, "--no-log"], catch_exceptions=False).output
    assert "以下取自你的描述" in text and "KV 缓存" in text
    assert "未提供模型和 GPU" not in text


def test_given_facts_win_over_the_words():
    """A case file's GPU, a flag's model: the words fill only what is unknown."""
    inputs = gather(question="On two H800s, TP2, Qwen2.5-32B-Instruct, 8K-token prompts", overrides={"gpu": "A100-80G", "num_gpus": 4})
    assert inputs.deployment.gpu == "A100-80G" and inputs.deployment.num_gpus == 4
    assert inputs.deployment.model == "Qwen2.5-32B-Instruct"
    assert inputs.stated.gpu is None and inputs.stated.model == "Qwen2.5-32B-Instruct"
    profile = gather(profile=REPO / "examples" / "seed-qwen32b-h800-long-input.yaml")
    assert profile.stated.model is None and profile.stated.gpu is None  # the case file gives them


def test_words_about_another_engine_describe_that_engine_and_a_comparison_describes_vllm():
    """A report about SGLang alone states SGLang's setup: not read as a vLLM deployment. vLLM named
    beside the engine it is compared with is the deployment asked about (session 14: "vLLM on an
    MI250 gives 3-6 tok/s, Ollama 85" was answered "model and GPU not given")."""
    other = gather(question="SGLang 0.4.1 on one H100 serving Llama-3.1-8B: TTFT is 2 s at 64 concurrent requests", predict=False)
    assert other.deployment.model is None and other.deployment.gpu is None and other.deployment.vllm_version is None
    assert other.words_about_other_engine
    compared = gather(question="SGLang on one H100 is twice as fast as vLLM 0.6.3 for Llama-3.1-8B at 64 concurrent requests", predict=False)
    assert (compared.deployment.model, compared.deployment.gpu, compared.deployment.vllm_version) == ("Llama-3.1-8B", "H100-SXM", "0.6.3")
    not_vllm = gather(question="没有用 vllm，直接用 transformers 在一张 A100 上跑 Qwen2.5-7B，很慢", predict=False)
    assert not_vllm.deployment.model is None and not_vllm.deployment.gpu is None


def test_a_chat_question_that_states_facts_is_modelled_with_them(seed_post):
    session = Session()
    plain = session.inputs("why is it slow?")
    assert plain.engine is None
    stated = session.inputs(seed_post)
    assert stated.engine is not None and stated.stated.gpu == "H800-SXM"
    assert session.inputs(seed_post).engine is stated.engine  # gathered once per set of facts
    assert session.inputs("and at 200 clients?").engine is None  # a question that states no deployment


def test_a_longer_max_model_len_resolves_the_defaults_that_follow_it():
    """vLLM 0.6 (V0) turns chunked prefill on above 32K: a max_model_len raised to the workload's
    64K requests must get it, or a 63K prompt would never be scheduled (the token budget stays 32K)."""
    dep = Deployment(model="Qwen2.5-32B-Instruct", gpu="H800", num_gpus=2, vllm_version="0.6.3")
    engine = build_engine_model(dep, EngineArgs(tensor_parallel_size=2), needed_model_len=64_000)
    cfg = engine.config
    assert cfg.max_model_len == 64_000 and cfg.source_of("max_model_len") == "derived"
    assert cfg.enable_chunked_prefill and cfg.max_num_batched_tokens == 512


# Found by a review of 40 fitting-part reports asked as plain questions (session 11): the words below
# are theirs or close to them.


def test_a_card_someone_else_used_leaves_the_gpu_undecided():
    assert read_stated_facts("我在 V100 上测试；也有人在 RTX 4090 上测过").gpu is None


def test_ranges_counts_and_token_phrasings():
    assert read_stated_facts("并发 1~4 时速度正常").concurrency == [1, 4]
    # a sweep keeps its ends and its middle: the load where the speed falls is usually the highest
    assert read_stated_facts("1 concurrent request is fine; 8 concurrent, 32 concurrent, 64 concurrent and 128 concurrent requests get slower").concurrency == [1, 32, 128]
    assert read_stated_facts("1 并发正常，2 并发、4 并发、8 并发、16 并发和 32 并发都变慢").concurrency == [1, 8, 32]
    assert read_stated_facts("concurrent_requests set to 128").concurrency == [128]
    assert read_stated_facts("we send 100 requests at the same time").concurrency == [100]
    assert read_stated_facts("客户端并发都调到 1000").concurrency == [1000]
    said = read_stated_facts("prompts of 1000 input tokens with 200 output tokens on 单张 4090")
    assert (said.input_len, said.output_len, said.gpu, said.num_gpus) == (1000, 200, "RTX-4090", 1)


def test_names_the_catalog_lacks_are_said_to_be_missing_from_it_not_missing():
    question = "We serve falcon-40b with vLLM on four NVIDIA T4 GPUs and get 10 tok/s at 8 concurrent requests. Why so slow?"
    said = read_stated_facts(question)
    assert (said.model, said.gpu, said.num_gpus) == ("falcon-40b", "T4", 4)
    text = CliRunner().invoke(cli, ["ask", question, "--no-log"], catch_exceptions=False).output
    assert "falcon-40b is not in the catalog" in text and "not given" not in text


def test_words_about_another_engine_do_not_build_vllms_model():
    """KTransformers offloads experts to the CPU: a DeepSeek-R1 'on one 4090' is not vLLM's deployment."""
    inputs = gather(question="KTransformers 跑 DeepSeek-R1 Q4_K_M，单张 4090，每秒只有 8 个 token，为什么？")
    assert inputs.stated.model is None and inputs.stated.gpu is None and inputs.engine is None


def test_a_deployment_the_words_report_figures_for_ran():
    """The words say it served 16 clients at 30 tok/s, so a memory model that says it cannot start
    has its own inputs wrong (here: a 70B model on one 80 GB card must have run quantised, which the
    words do not say): no memory finding."""
    result = CliRunner().invoke(cli, ["ask", "Serving Llama-3.1-70B-Instruct with vLLM on one H100, we get 30 tok/s per request at 16 concurrent requests. Why is it slow?", "--json", "--no-log"], catch_exceptions=False)
    data = json.loads(result.output)
    assert any("yet this deployment ran" in n for n in data["notes"])
    assert not {"memory_config", "kv_capacity"} & {f["cause"] for f in data["findings"][:3]}


def test_gpt_oss_is_modelled_in_its_own_mxfp4_weights():
    """The reviewer's case of session 11: gpt-oss-120b on one H100 was read as BF16 and "would not start"."""
    inputs = gather(question="Serving gpt-oss-120b with vLLM on one H100, we get 30 tok/s per request at 16 concurrent requests. Why is it slow?")
    assert inputs.engine is not None and inputs.engine.memory.fits


# Found by a second review (24 other fitting-part reports, session 11).


def test_a_longer_name_the_catalog_lacks_is_not_cut_to_a_catalog_one():
    """"DeepSeek-R1-Distill-Qwen-7B" is a 7B model, not the 671B DeepSeek-R1 its name begins with."""
    assert read_stated_facts("serving DeepSeek-R1-Distill-Qwen-7B with vLLM on one L40S").model == "DeepSeek-R1-Distill-Qwen-7B"
    assert read_stated_facts("we run a 0.5B model at 64 concurrent").model is None  # "a 0.5B" is no name
    # the drafter's parallelism is not the deployment's (a reviewer's find)
    assert read_stated_facts("on 8x H200 (using TP=4), Llama-3.1-8B with an EAGLE-3 drafter (draft TP=1)").tensor_parallel_size == 4
    # a catalog name inside the longer one ("Llama-70B") is not a second model (a reviewer's find)
    assert read_stated_facts("用 evalscope 压测 vLLM 部署的 DeepSeek-R1-Distill-Llama-70B，并发 512").model == "DeepSeek-R1-Distill-Llama-70B"
    assert read_stated_facts("32k context on 2x H100").input_len == 32_000


def test_words_that_say_vllm_is_not_what_runs_build_no_vllm_model():
    question = "用 swift 直接推理 llava 72B 多模态模型（没有用 vllm），单张 A100，batch_size=1 时显卡利用率很低"
    inputs = gather(question=question)
    assert inputs.stated.model is None and inputs.engine is None and inputs.words_about_other_engine
    text = CliRunner().invoke(cli, ["ask", question, "--no-log"], catch_exceptions=False).output
    assert "vLLM 以外的推理引擎" in text and "未提供模型" not in text


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("Qwen2.5-72B AWQ on 2 A100s is slow", "Qwen2.5-72B-AWQ"),
        ("Qwen2.5-72B-Instruct (AWQ) on one 4090", "Qwen2.5-72B-Instruct-AWQ"),
        ("我用 Qwen3-32B FP8 跑在 H20 上", "Qwen3-32B-FP8"),
        ("Qwen3-32B fp8 kv cache on H100", "Qwen3-32B"),  # the cache's format, not the weights'
        ("Llama-3.1-70B-Instruct GPTQ-Int4 tp2", "Llama-3.1-70B-Instruct-GPTQ-Int4"),
    ],
)
def test_a_weight_format_written_after_the_name_joins_it(text, model):
    assert read_stated_facts(text).model == model


def test_a_stated_awq_checkpoint_is_modelled_at_four_bits():
    """"Qwen2.5-72B AWQ on two A100s": 4-bit weights leave room for KV; read as BF16 they would not."""
    inputs = gather(question="Qwen2.5-72B AWQ on two A100-80GB, tp2, 2K prompts, 32 clients: why is TTFT high?")
    assert inputs.engine is not None and inputs.engine.model.checkpoint_quantization == "awq"
    assert inputs.engine.memory.weights_gib < 25


@pytest.mark.parametrize(("text", "version"), [("vLLM 0.18.0rc1 is slower than 0.17", "0.18.0rc1"), ("built vLLM v0.10.1.dev3 from source", "0.10.1.dev3"), ("vllm==0.8.5.post1 on H100", "0.8.5.post1"),
                                               # a sentence that ends on the release, and a "v" pre-release (read as "v0.11.0" beside "0.11.0rc1": two releases, neither kept)
                                               ("Qwen2.5-7B on one L40S, vLLM 0.8.5.", "0.8.5"), ("we run vLLM v0.11.0rc1.", "0.11.0rc1"),
                                               # a four-part release and the release in a docker image's tag
                                               ("Qwen3-30B-A3B on one H100, vLLM 0.10.1.1", "0.10.1.1"), ("docker run vllm/vllm-openai:v0.10.1.1 --model m", "0.10.1.1")])
def test_pre_releases_and_builds_are_read_whole(text, version):
    assert read_stated_facts(text).vllm_version == version


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("Upgrading vLLM from v0.24.0 to v0.25.0 cost 8% of prefill. vLLM v0.24.0 ships FlashInfer 0.6.12.", "0.25.0"),
        ("vllm 0.8.5 -> 0.9.2 made TTFT worse", "0.9.2"),
        ("we upgraded to vLLM 0.10.1 and it is slower", "0.10.1"),
        ("升级到 0.10.1 之后 vllm 变慢了", "0.10.1"),
    ],
)
def test_the_release_upgraded_to_is_the_one_that_runs(text, version):
    """A reviewer's find (session 12): the first release named was read as the user's."""
    assert read_stated_facts(text).vllm_version == version


@pytest.mark.parametrize(("words", "version"), [
    ("a 16% TPOT speed-up on vLLM v0.18.0, but on v0.19.0 the speed-up is cut in half", None),  # which one runs is not said
    ("after upgrading vLLM from 0.6.3 to 0.7.2 it got slower", "0.7.2"),
    ("vLLM 0.6.3 with flashinfer 0.1.6 on one H100", "0.6.3"),
    ("vllm==0.8.5 (the v0.8.5 image)", "0.8.5"),
])
def test_a_release_compared_with_another_is_not_taken_as_the_one_that_runs(words, version):
    assert read_stated_facts(words).vllm_version == version


def test_facts_read_beside_a_case_file_are_corrected_in_the_case_file():
    """A reviewer's find: "give ... or a case file to correct them" printed to a user who gave one."""
    case = Path(__file__).resolve().parents[1] / "knowledge" / "cases" / "freetoken-111-moe-cache-auto-8k-kv-pool.yaml"
    notes = json.loads(CliRunner().invoke(cli, ["ask", "--profile", str(case), "--json", "--no-log"], catch_exceptions=False).output)["notes"]
    read = [n for n in notes if n.startswith("Read from your words")]
    assert read and "case file did not give" in read[0] and "--model" not in read[0], notes


@pytest.mark.parametrize(("text", "tokens", "chars"), [
    ("输入约 5 万字，输出 1000 token", (None, 1000), (50_000, None)),
    ("输入 3000 个汉字，输出 500 字", (None, None), (3000, 500)),
    ("输入约 2000 字符、输出 512", (None, 512), (2000, None)),
    ("prompts of 50000 Chinese characters", (None, None), (50_000, None)),
    ("prompt length 2000 characters", (None, None), (None, None)),  # no script named: no ratio, not read
    ("input of 2000 words", (None, None), (None, None)),
    ("输入 2000 字节", (None, None), (None, None)),  # bytes
    ("输出 35 字/秒，输入 800", (800, None), (None, None)),  # rates, not lengths
    ("每秒输出 30 字", (None, None), (None, None)),
    ("生成 30 字每秒", (None, None), (None, None)),
    ("输出 20 tokens/s", (None, None), (None, None)),
    ("输入 3000 多字", (None, None), (3000, None)),
    ("输入 5 万多字", (None, None), (50_000, None)),
    ("输入 1 万余字", (None, None), (10_000, None)),
    ("输入 3000 个中文字", (None, None), (3000, None)),
    ("输入 2000 個漢字", (None, None), (2000, None)),
    ("5万字的输入", (None, None), (50_000, None)),
    ("输入 2000 字/条", (None, None), (2000, None)),  # per request: a length
    ("输入 63K，输出 1K", (63_000, 1_000), (None, None)),
])
def test_a_length_in_characters_is_not_read_as_tokens(text, tokens, chars):
    said = read_stated_facts(text)
    assert (said.input_len, said.output_len) == tokens
    assert (said.input_chars, said.output_chars) == chars


def test_chinese_characters_are_modelled_as_the_tokenizers_tokens_and_the_answer_says_so():
    # "输入约 5 万字" on Qwen2.5-32B (a 152K vocabulary): about 30,000 tokens at 0.6 token per character
    # (DeepSeek's published average for such tokenizers), not 50,000; the note says both figures
    from vllm_advisor.diagnosis.char_lengths import SMALL_VOCAB_TOKENS_PER_CHAR, tokens_per_char

    question = "我用 vllm 部署 Qwen2.5-32B，两张 H800，TP2，输入约 5 万字，输出 1000 token，40 并发时每个请求只有 20 token/s，为什么？"
    inputs = gather(question=question)
    assert (inputs.input_len, inputs.output_len) == (30_000, 1_000)
    assert inputs.stated.input_chars == 50_000
    text = CliRunner().invoke(cli, ["ask", question, "--no-log"], catch_exceptions=False).output
    assert "输入 50,000 个汉字，按约 30,000 个 token 计" in text and "0.6" in text
    assert tokens_per_char("Mixtral-8x7B-Instruct-v0.1") == SMALL_VOCAB_TOKENS_PER_CHAR  # a 32K vocabulary
    assert tokens_per_char("Llama-2-7b-chat-hf") == SMALL_VOCAB_TOKENS_PER_CHAR  # not in the catalog: by name
    assert tokens_per_char(None) == 0.6
    english = CliRunner().invoke(cli, ["ask", "Qwen2.5-32B on two H800, TP2, prompts of 50000 Chinese characters, 40 concurrent clients, why slow?", "--no-log"],
                                 catch_exceptions=False).output
    assert "prompts of 50,000 Chinese characters, read as about 30,000 tokens (an estimate at 0.6 tokens per character" in english


@pytest.mark.parametrize(
    "text,expected",
    [
        # a number belongs to the word right before it, not to the word after it (a reviewer's finds)
        ("Qwen2.5-14B 两张4090 输入 3000 输出 300 并发 64，吞吐上不去", (3000, 300, [64])),
        ("Llama-3.1-8B 单卡H100 输入3000输出300并发64 首token很慢", (3000, 300, [64])),  # not 100 from "H100"
        ("Qwen2.5-7B 单卡 A100，并发 300，输入 1K 输出 512。", (1000, 512, [300])),  # "1K 输出" took 输出's own 512
        ("prompt 2000 tokens, output 256, 64 concurrent", (2000, 256, [64])),  # 256 is the output's, not a client count
        # Chinese numerals and hedges after the words
        ("输入 2K，输出 2千，并发五十", (2000, 2000, [50])),
        ("输入大概3万token，输出500左右", (30000, 500, [])),
        ("并发40/100，输入63K", (63000, None, [40, 100])),
        # the forms read before stay read
        ("63K 的输入，1K 输出", (63000, 1000, [])),
        ("40 and 100 concurrent users, 2K prompts", (2000, None, [40, 100])),
    ],
)
def test_each_number_is_read_for_the_word_it_follows(text, expected):
    said = read_stated_facts(text)
    assert (said.input_len, said.output_len, said.concurrency) == expected


@pytest.mark.parametrize(
    "text,flags",
    [
        ("Qwen2.5-7B on H100, max-model-len 设成 128K，为什么 1.3x？", {"max_model_len": 131072}),  # a reviewer's case: 32,768 was assumed
        ("I run with --max-num-seqs 8 and 64 clients", {"max_num_seqs": 8}),
        ("gpu_memory_utilization=0.95, kv_cache_dtype=fp8", {"gpu_memory_utilization": 0.95, "kv_cache_dtype": "fp8"}),
        ("--max-num-batched-tokens=2048 --block-size 32", {"max_num_batched_tokens": 2048, "block_size": 32}),
        # proposed, not run: nothing read
        ("Should I set max_num_seqs to 256?", {}),
        ("改成 max_num_batched_tokens 512 会不会更快", {}),
        ("如果把 max_num_seqs 设成 64 呢", {}),
        ("max_num_seqs 8 or max_num_seqs 16?", {}),  # two values: neither
    ],
)
def test_settings_given_with_their_value_are_read(text, flags):
    assert read_stated_facts(text).flags == flags


def test_a_setting_in_the_words_fills_only_what_the_command_left_unsaid():
    inputs = gather(question="Qwen2.5-7B on one H100, --max-num-seqs 8 and max-model-len 16K, 64 clients: why is TTFT high?",
                    serve_cmd="vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 32", predict=False)
    assert inputs.engine_args.max_num_seqs == 32  # the command ran: it wins
    assert inputs.engine_args.max_model_len == 16384
    assert inputs.stated.flags == {"max_model_len": 16384}


@pytest.mark.parametrize(
    "text,fmt",
    [
        ("GPTQ 4bit 的 Qwen2.5-32B 放在单张 4090 上，生成速度只有 8 token/s", "gptq"),  # a reviewer's case: advised to quantise
        ("Qwen2.5-72B-Instruct-AWQ on 2x A100", "awq"),
        ("a 4-bit model on an L4", "w4a16"),
        ("AWQ vs GPTQ on Llama-70B: which is faster?", None),  # a comparison names no one format
        ("fp8 kv cache on H100", None),  # the KV cache's format, not the weights'
        ("int4 kv cache", None),
    ],
)
def test_the_weights_format_the_words_name_is_read(text, fmt):
    assert read_stated_facts(text).quantization == fmt


def test_weights_the_question_says_are_quantised_are_not_advised_to_be_quantised():
    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.diagnosis.report_facts import weights_quantised

    inputs = gather(question="GPTQ 4bit 的 Qwen2.5-32B 放在单张 4090 上，生成速度只有 8 token/s，正常吗？")
    assert inputs.deployment.quantization == "gptq" and weights_quantised(inputs)
    assert inputs.engine is not None and inputs.engine.memory.weights_gib < 24  # modelled at 4 bits: it fits the card
    flags = [r.flag for f in diagnose(inputs).findings for r in f.recommendations]
    assert "--quantization fp8" not in flags and not any(f and "awq" in f.lower() for f in flags)


@pytest.mark.parametrize("word,value", [("五十", 50), ("十五", 15), ("两千", 2000), ("两千五", 2500), ("一万二", 12000), ("三百五", 350), ("一百零五", 105), ("五五", None)])
def test_chinese_numerals_are_read_as_people_say_them(word, value):
    from vllm_advisor.probe.stated_facts import _zh_numeral

    assert _zh_numeral(word) == value
    if value is not None:
        assert read_stated_facts(f"并发{word}，输入 2K").concurrency == [value]


@pytest.mark.parametrize(
    "text,input_len,output_len",
    [
        # reviewers' finds: "Prompts are ... tokens" and "N output" with no "tokens" after it were not read
        ("Prompts are 2000 tokens, outputs 300, about 32 concurrent users.", 2000, 300),
        ("Prompts are about 32K tokens and outputs are roughly 1k", 32000, 1000),
        ("Llama-3.1-8B on one H100, 1000 input, 200 output, 4 clients", 1000, 200),
        ("1000 input and 200 output.", 1000, 200),
    ],
)
def test_lengths_said_with_a_verb_or_without_tokens(text, input_len, output_len):
    said = read_stated_facts(text)
    assert (said.input_len, said.output_len) == (input_len, output_len)


@pytest.mark.parametrize(
    "text,gpus,tp",
    [
        # a reviewer's find: the option asked about ("Would TP=2 on two H100s be better?") was read as the deployment
        ("Qwen2.5-32B on a single H100 SXM 80GB. Would TP=2 on two H100s be better than running two separate copies?", 1, None),
        ("改成 TP4 会不会更快？现在是 TP2，两张 A100", 2, 2),
        ("We run TP=2 on two H100s", 2, 2),
    ],
)
def test_a_proposed_deployment_is_not_read_as_the_one_that_runs(text, gpus, tp):
    said = read_stated_facts(text)
    assert (said.num_gpus, said.tensor_parallel_size) == (gpus, tp)


def test_a_request_id_is_not_a_model():
    """A request id pasted beside the model ("cmpl-9f2c1e3b": "3b") was read as a second model and
    the deployment lost its own (a reviewer's find)."""
    assert read_stated_facts("Llama-3.1-8B-Instruct on one H100 slow (request cmpl-9f2c1e3b)").model == "Llama-3.1-8B-Instruct"
    assert read_stated_facts("request chatcmpl-a1b2c3d4e5f6 with qwen2-7b").model == "qwen2-7b"


def test_a_card_named_by_its_number_and_memory():
    """"4090 24G" is how Chinese users name the card (a reviewer's find: read as no GPU)."""
    assert read_stated_facts("4090 24G 单卡，vLLM 0.9.0，Qwen3-8B").gpu == read_stated_facts("单卡 RTX 4090").gpu is not None


@pytest.mark.parametrize(("text", "gpu", "tp"), [
    # the user's card is the one named with its count; the colleague's, the old box's are comparisons
    ("单张 L20 48G 跑 Qwen2.5-14B，单请求 23 token/s，同事 H100 能到 80 多。或者两张 L20 开 TP2 能到 50 吗？", "L20", None),
    ("Qwen2.5-72B-Instruct on 8xH20 TP8, on the old H100 box TTFT was 0.2 s", "H20", 8),
    ("是不是加上 --tensor-parallel-size 8 就好了？单卡 A100", "A100", None),
])
def test_a_comparison_card_and_a_proposed_tp_are_not_the_deployment(text, gpu, tp):
    said = read_stated_facts(text)
    assert (said.gpu or "").startswith(gpu) and said.tensor_parallel_size == tp


@pytest.mark.parametrize(("text", "gpu", "count"), [
    ("用 4090 跑 Qwen2.5-7B，速度只有 20 token/s", "RTX-4090", None),
    ("在4090上跑Qwen2.5-7B", "RTX-4090", None),
    ("我的 3090 显卡跑 14B 很慢", "RTX-3090", None),
    ("2 x 4090 GPUs, Qwen2.5-14B", "RTX-4090", 2),
    ("4096 tokens on 4090 GPU", "RTX-4090", None),
])
def test_a_consumer_card_named_by_its_number_where_the_words_make_it_a_card(text, gpu, count):
    """How Chinese forums write them (a new user's find); the card's number is never a GPU count."""
    said = read_stated_facts(text)
    assert (said.gpu, said.num_gpus) == (gpu, count)


def test_a_number_that_is_a_length_is_not_a_card():
    assert read_stated_facts("输入4090个token").gpu is None
    assert read_stated_facts("prompts of 4090 tokens").gpu is None


@pytest.mark.parametrize(("text", "concurrency"), [
    ("单并发 45 tok/s", []),  # one client at 45 tok/s, not 45 clients (a new user's find)
    ("单并发速度 45 token/s，并发 16 时每个请求 12 token/s", [16]),
    ("4x H100 TP=4, 100 concurrent users", [100]),  # "TP=4, 100 concurrent" is not "4 or 100 clients"
    ("并发 40 和 100", [40, 100]),
    ("TP = 4, 100 concurrent users", [100]),
    ("tp 4, 100 concurrent users", [100]),
    ("batch size 8, 16 concurrent users", [16]),
])
def test_client_counts_are_not_read_from_rates_or_settings(text, concurrency):
    assert read_stated_facts(text).concurrency == concurrency


@pytest.mark.parametrize(("text", "lengths"), [
    ("1k in 512 out", (1000, 512)),
    ("32 users, 1k in/512 out, throughput?", (1000, 512)),
    ("2K in / 2K out", (2000, 2000)),
    ("1024 in, 512 out", (1024, 512)),
    ("ISL 1024 OSL 512", (1024, 512)),
    ("isl=1024, osl=512", (1024, 512)),
    ("running in 2 GPUs, 8 in parallel", (None, None)),
    # a scaled number the word before it owns ("input 1k") is skipped and the search goes on after it:
    # "1k output" was read as the output and "output 512" never looked at (a new user's find)
    ("input 1k output 512, 32 users", (1000, 512)),
    ("input 1024 tokens output 512 tokens", (1024, 512)),
    ("prompt 2k output 256", (2000, 256)),
    ("输入 2k 输出 512", (2000, 512)),
    # a full stop after the number ends the sentence, not the number (a reviewer's find)
    ("input 1k output 512.", (1000, 512)),
    ("prompt length 2048.", (2048, None)),
])
def test_lengths_written_as_benchmark_write_ups_give_them(text, lengths):
    """A new user's find: "1k in/512 out" was dropped, and the load went unmodelled."""
    said = read_stated_facts(text)
    assert (said.input_len, said.output_len) == lengths


@pytest.mark.parametrize(("text", "single", "throughput", "counts_input", "per_request"), [
    ("单个请求 60 token/s，并发 32 时吞吐 900 token/s，正常吗？", 60, 900, False, False),
    ("A single request gets 60 tok/s; at 32 concurrent users total throughput is 900 tok/s.", 60, 900, False, False),
    ("Single user: 45 tok/s. With 16 users: 400 tok/s total.", 45, 400, False, False),
    ("单并发 45 tok/s，并发16 总吞吐 400 tok/s", 45, 400, False, False),
    ("batch size 1 gives 80 tok/s", 80, None, False, False),
    ("at 64 clients the Total Token throughput is 5000 tok/s", None, 5000, True, False),
    # a client count before the speed in its sentence makes "单个请求" each request's at that load
    ("并发 32 时，单个请求只有 20 token/s", None, None, False, False),
    ("8 users, each gets 20 tok/s", None, None, False, True),
    ("one user alone gets 80 tok/s, 10 users 30 tok/s each", 80, None, False, True),
    # the prompt's rate is neither a request's speed nor the server's output
    ("prefill throughput 9000 tok/s", None, None, False, False),
    # "总是" (always), "总之", "整体来看", "combined ... each" do not make a figure the server's total (a reviewer's finds)
    ("并发 32 时每个请求总是只有 20 token/s", None, None, False, True),
    ("总之，单个请求只有 40 token/s", 40, None, False, False),
    ("整体来看单个请求 50 token/s", 50, None, False, False),
    ("32 clients combined get only 40 tok/s each", None, None, False, True),
    ("速度总是只有 30 token/s", None, None, False, False),
    # a rate is not one request alone, nor is "the GPU alone"; "single-user"; a throughput word with the load
    # between it and the figure; what a total counts ("prompt+output") is no prefill (a reviewer's finds)
    ("At 1 request/s the speed is 40 tok/s", None, None, False, False),
    ("the GPU alone can do 3000 tok/s", None, None, False, False),
    ("Single-user decode is 100 tok/s", 100, None, False, False),
    ("one request alone gets 60 tok/s while 32 concurrent clients get 900 tok/s in total", 60, 900, False, False),
    ("throughput at 64 users: 2000 tok/s", None, 2000, False, False),
    ("吞吐在并发64时是 2000 token/s", None, 2000, False, False),
    ("total throughput (prompt+output) 3000 tok/s at 16 clients", None, 3000, True, False),
    ("The total is 40 tok/s per request at 32 clients", None, None, False, True),
    ("One request alone runs at 80 tok/s but at 64 concurrent each gets 20 tok/s", 80, None, False, True),
    ("单个请求 60 token/s，但并发 32 时每个请求只有 20 token/s", 60, None, False, True),
])
def test_a_speed_is_read_for_whom_the_words_say(text, single, throughput, counts_input, per_request):
    """One request alone's speed, the whole server's output rate and each request's speed at a load are
    told apart by the words around them (a new user's find: "单个请求 60 token/s，并发 32 时吞吐 900" compared
    nothing with the model)."""
    said = read_stated_facts(text)
    assert (said.single_tok_s, said.throughput_tok_s, said.throughput_counts_input, said.per_request) == (single, throughput, counts_input, per_request)


@pytest.mark.parametrize(("text", "speed"), [
    ("DeepSeek-R1-Distill-Qwen-14B 在 L20 上，每秒大概 35 个 token，单并发，为什么这么慢？", 35),
    ("每秒输出 30 个 token", 30),
    ("每秒 12.5 个 tokens", 12.5),
])
def test_a_rate_written_number_last_in_chinese_is_read(text, speed):
    """"每秒大概 35 个 token" was left unread (a Chinese user's find: 35 tok/s of a 14B on an L20 is past what
    its bandwidth allows one request in bf16, and the answer blamed CUDA graphs at 7%)."""
    assert read_stated_facts(text).request_tok_s == speed


@pytest.mark.parametrize(("text", "ttft_ms", "clients"), [
    ("Qwen2.5-14B-Instruct 单卡 L20 48G，输入 63K，首 token 要等 20 多秒，正常吗？", 20_000, None),
    ("Why is TTFT 16 seconds at 48 concurrent clients with 8K prompts?", 16_000, 48),
    ("TTFT at 64 users is 10s but TPOT is fine", 10_000, 64),
    ("With 32 clients, TTFT is 12 s.", 12_000, 32),
    ("time to first token of 3.5 seconds for a single request", 3_500, 1),
    ("并发100时首token时间达到30秒", 30_000, 100),
    ("首字延迟 2-3 秒，并发 20", 2_500, 20),
    ("TTFT went from 200 ms to 15 s after upgrading", 15_000, None),
    ("64 并发 8k 输入时 TTFT 从 3.2 秒降到 0.9 秒", 900, 64),
    # one request alone's and the heavier load's: the load asked about is the heavier
    ("single request TTFT 800ms, at 32 clients TTFT 12 s", 12_000, 32),
    # not the typical first token's: a percentile, another latency, figures "respectively" to several loads
    ("TTFT p99 20s, p50 2s", None, None),
    ("TTFT is fine but TPOT 80 ms", None, None),
    # a target is not what was seen
    ("TTFT SLO is 2 s", None, None),
    ("p99 TTFT is 20 s", None, None),
    ("max TTFT 30 s", None, None),
    ("TTFT 要求 1 秒以内，现在 5 秒", None, None),
    ("首 token 时间的目标是 2 秒", None, None),
    ("并发 10 和 50 时首 token 分别是 1 秒和 8 秒", None, None),
    ("TTFT is 1 s and 8 s at 10 and 50 users respectively", None, None),
    ("并发 10 和 50 时首 token 8 秒", None, None),
])
def test_a_time_to_first_token_is_read_with_its_load(text, ttft_ms, clients):
    """"首 token 要等 20 多秒" was not read at all (nor counted as a figure measured on a running server): a
    TTFT the words state, and the client count it was seen at, are set beside the model's (agreement.py)."""
    said = read_stated_facts(text)
    assert (said.ttft_ms, said.ttft_clients) == (ttft_ms, clients)
    assert said.reports_figures


@pytest.mark.parametrize(("text", "concurrency", "input_len", "output_len"), [
    ("48 并发 8k 输入", [48], 8000, None),
    ("16 并发，8k 输入 128 输出", [16], 8000, 128),
    ("8k 输入 1k 输出", [], 8000, 1000),
    ("输入 8k 输出 1k", [], 8000, 1000),
    ("并发 64 输入 3000 输出 300", [64], 3000, 300),
    ("输入 3000 输出 300 并发 64", [64], 3000, 300),
    # keyword-first after a word the owner reader knows (a reviewer's finds: read number-first)
    ("输入大约 3000 输出 300 并发 64", [64], 3000, 300),
    ("上下文 32k 并发 16 输入 8k", [16], 8000, None),
    # a setting's value listed beside a client count is not one
    ("Qwen2.5-32B on 2x L20 TP2, max-num-seqs 256, 40 users", [40], None, None),
])
def test_numbers_written_before_their_words_belong_to_the_word_after(text, concurrency, input_len, output_len):
    """"48 并发 8k 输入" read 8 as a client count (a new user's find): in a chain written number first, each
    number is the word's after it; keyword-first chains keep their order."""
    said = read_stated_facts(text)
    assert (said.concurrency, said.input_len, said.output_len) == (concurrency, input_len, output_len)


@pytest.mark.parametrize(("text", "prefix"), [
    ("RAG 场景，所有请求共用一个 7.5k 的系统提示词，16 并发，8k 输入 128 输出", 7500),
    ("a 2000-token shared system prompt, 4k prompts", 2000),
    ("shared prefix of 3000 tokens", 3000),
    ("共享前缀 4k，输入 6k", 4000),
    ("8k prompts with a 7.5K common prefix", 7500),
    ("all requests have the same system prompt", None),  # no length: nothing to model
])
def test_a_shared_prefix_is_read_with_its_length(text, prefix):
    """"所有请求共用一个 7.5k 的系统提示词" was not read: with prefix caching off in the log, what the setting
    costs could not be modelled (a new user's find on a planted real run)."""
    assert read_stated_facts(text).shared_prefix_len == prefix


@pytest.mark.parametrize(("text", "chars", "single"), [
    ("Qwen2.5-72B-Instruct-AWQ 跑在 2 张 4090 上（TP2），单用户输出大概每秒 30 个字，正常吗？", 30, True),
    ("每秒生成 20 个汉字", 20, False),
    ("输出速度 30 字/秒", 30, False),
    ("输入 5000 字", None, False),  # a length in characters, not a rate
])
def test_a_speed_in_chinese_characters_a_second_is_read(text, chars, single):
    """"单用户输出大概每秒 30 个字" was dropped (a new user's find): read as characters a second, turned into
    tokens a second by the gatherer with the model's tokenizer family."""
    said = read_stated_facts(text)
    assert (said.chars_per_s, said.chars_single) == (chars, single)


def test_a_number_last_rate_with_each_request_is_each_requests():
    """"10 个并发 ... 每个请求每秒只有 8 tokn": the typo is a token, and "每个请求" makes it each request's."""
    said = read_stated_facts("T4 上跑 Qwen2.5-3B，10 个并发 输入 1k 输出 512，每个请求每秒只有 8 tokn，是不是太慢了？")
    assert (said.request_tok_s, said.per_request) == (8.0, True)


def test_a_case_files_latency_given_as_one_number_is_its_mean():
    """`ttft_ms: 21000` in a case file's observation was refused with "expected a mapping" (a new user's find)."""
    from vllm_advisor.schema.case import LatencyFigures

    assert LatencyFigures.model_validate(21000).mean == 21000
    assert LatencyFigures.model_validate({"p50": 900}).p50 == 900
    with pytest.raises(ValueError):
        LatencyFigures.model_validate(True)
