import asyncio
import json
import os

from unieval_local.compat import SummarizationEvaluator, SummaryData


async def main():
    """Run a single summary evaluation example."""
    data = SummaryData(
        input="Meeting transcript or source text here...",
        summary="Generated summary here...",
    )

    evaluator = SummarizationEvaluator(model_credentials=os.getenv("GOOGLE_API_KEY"))

    result = await evaluator.evaluate(data)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
